#define TOML_EXCEPTIONS 0
#include "gate/run_file.h"

#include <toml++/toml.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/core.h>

#include "core/file.h"

namespace ek::gate {

Result<EvenfixMode> ParseEvenfixMode(std::string_view s) {
  if (s == "min") return EvenfixMode::kMin;
  if (s == "pad") return EvenfixMode::kPad;
  if (s == "off") return EvenfixMode::kOff;
  return InvalidArgumentError(fmt::format("evenfix mode '{}' (min, pad, off)", s));
}

std::string_view EvenfixModeName(EvenfixMode m) {
  switch (m) {
    case EvenfixMode::kMin: return "min";
    case EvenfixMode::kPad: return "pad";
    case EvenfixMode::kOff: return "off";
  }
  return "min";
}

std::string RunFile::Resolve(const std::string& p) const {
  if (p.empty() || p[0] == '/' || path.empty()) return p;
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return p;
  return path.substr(0, slash + 1) + p;
}

namespace {

// Binds keys of one table to fields; anything else in the table is an error.
class Table {
 public:
  Table(const toml::table* t, std::string name, std::string file) : t_(t), name_(std::move(name)), file_(std::move(file)) {}

  Status Int(std::string_view key, int* out) {
    return Field(key, [&](const toml::node& n) -> Status {
      auto v = n.value<int64_t>();
      if (!n.is_integer() || !v) return TypeError(key, "an integer");
      *out = static_cast<int>(*v);
      return Status::Ok();
    });
  }
  Status Num(std::string_view key, double* out) {
    return Field(key, [&](const toml::node& n) -> Status {
      if (!n.is_number()) return TypeError(key, "a number");
      *out = *n.value<double>();
      return Status::Ok();
    });
  }
  Status Str(std::string_view key, std::string* out) {
    return Field(key, [&](const toml::node& n) -> Status {
      if (!n.is_string()) return TypeError(key, "a string");
      *out = *n.value<std::string>();
      return Status::Ok();
    });
  }
  Status Bool(std::string_view key, bool* out) {
    return Field(key, [&](const toml::node& n) -> Status {
      if (!n.is_boolean()) return TypeError(key, "true or false");
      *out = *n.value<bool>();
      return Status::Ok();
    });
  }
  Status Strings(std::string_view key, std::vector<std::string>* out) {
    return Field(key, [&](const toml::node& n) -> Status {
      const toml::array* a = n.as_array();
      if (!a) return TypeError(key, "an array of strings");
      out->clear();
      for (const auto& e : *a) {
        if (!e.is_string()) return TypeError(key, "an array of strings");
        out->push_back(*e.value<std::string>());
      }
      return Status::Ok();
    });
  }
  // Every key present must have been bound.
  Status NoOthers() const {
    if (!t_) return Status::Ok();
    for (const auto& [k, v] : *t_) {
      if (!seen_.count(std::string(k.str()))) {
        return InvalidArgumentError(fmt::format("{}: unknown key {}.{} (line {})", file_, name_, k.str(),
                                                v.source().begin.line));
      }
    }
    return Status::Ok();
  }

 private:
  Status Field(std::string_view key, const std::function<Status(const toml::node&)>& f) {
    seen_.insert(std::string(key));
    if (!t_) return Status::Ok();
    const toml::node* n = t_->get(key);
    if (!n) return Status::Ok();
    return f(*n);
  }
  Status TypeError(std::string_view key, std::string_view want) const {
    const toml::node* n = t_->get(key);
    return InvalidArgumentError(fmt::format("{}: {}.{} (line {}) must be {}", file_, name_, key,
                                            n ? n->source().begin.line : 0, want));
  }
  const toml::table* t_;
  std::string name_, file_;
  std::set<std::string> seen_;
};

}  // namespace

Status ValidateRunFile(const RunFile& r) {
  auto bad = [&](std::string_view what) {
    return InvalidArgumentError(fmt::format("{}: {}", r.path.empty() ? "run" : r.path, what));
  };
  if (r.nodes < 1) return bad("cluster.nodes must be at least 1");
  if (r.gpus_per_node < 1) return bad("cluster.gpus_per_node must be at least 1");
  if (!r.hosts.empty() && static_cast<int>(r.hosts.size()) != r.nodes) {
    return bad(fmt::format("cluster.hosts lists {} hosts for {} nodes", r.hosts.size(), r.nodes));
  }
  if (r.seq_len < 1) return bad("train.seq_len must be positive");
  if (r.micro_batch < 1) return bad("train.micro_batch must be positive");
  if (r.grad_accum < 1) return bad("train.grad_accum must be positive");
  if (r.epochs < 1) return bad("train.epochs must be positive");
  if (r.warmup_steps < 0 || r.save_every < 0) return bad("train.warmup_steps and train.save_every must be >= 0");
  if (r.keep < 1) return bad("checkpoint.keep must be at least 1");
  if (r.write_gbps <= 0) return bad("checkpoint.write_gbps must be positive");
  if (r.headroom < 0 || r.headroom >= 1) return bad("gpu.headroom must be in [0, 1)");
  if (r.params < 0 || r.memory_gb < 0) return bad("model.params and gpu.memory_gb must be >= 0");
  if (r.backend != "nccl" && r.backend != "gloo") return bad("distributed.backend must be nccl or gloo");
  if (r.watch_poll_s <= 0 || r.stale_after_s <= 0 || r.agent_timeout_s <= 0) {
    return bad("watch.poll_s, watch.stale_after_s and watch.agent_timeout_s must be positive");
  }
  if (r.hang_floor_s <= 0 || r.hang_factor <= 0 || r.checkpoint_allowance_s < 0) {
    return bad("watch.hang_floor_s and watch.hang_factor must be positive, checkpoint_allowance_s >= 0");
  }
  if (r.throughput_floor_tok_s < 0 || r.throughput_samples < 1 || r.final_step < 0) {
    return bad("watch.throughput_floor_tok_s and watch.final_step must be >= 0, throughput_samples >= 1");
  }
  if (r.alert_backoff_s <= 0 || r.alert_backoff_max_s < r.alert_backoff_s || r.alert_resend_s <= 0) {
    return bad("alert.backoff_s and alert.resend_s must be positive, backoff_max_s >= backoff_s");
  }
  return Status::Ok();
}

Result<RunFile> ParseRunFile(std::string_view text, const std::string& name) {
  toml::parse_result parsed = toml::parse(text, name);
  if (!parsed) {
    const auto& err = parsed.error();
    return InvalidArgumentError(fmt::format("{}: line {}, column {}: {}", name, err.source().begin.line,
                                            err.source().begin.column, err.description()));
  }
  const toml::table& root = parsed.table();
  RunFile r;
  r.path = name;
  static const std::set<std::string> kTables = {"run", "cluster", "data", "model", "train", "checkpoint",
                                                "evenfix", "distributed", "gpu", "watch",
                                                "alert"};
  for (const auto& [k, v] : root) {
    if (!kTables.count(std::string(k.str()))) {
      return InvalidArgumentError(fmt::format("{}: unknown key {} (line {})", name, k.str(), v.source().begin.line));
    }
    if (!v.is_table()) {
      return InvalidArgumentError(fmt::format("{}: {} (line {}) must be a table", name, k.str(), v.source().begin.line));
    }
  }
  auto table = [&](const char* key) { return Table(root[key].as_table(), key, name); };
  {
    Table t = table("run");
    EK_RETURN_IF_ERROR(t.Str("name", &r.name));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("cluster");
    EK_RETURN_IF_ERROR(t.Int("nodes", &r.nodes));
    EK_RETURN_IF_ERROR(t.Int("gpus_per_node", &r.gpus_per_node));
    EK_RETURN_IF_ERROR(t.Strings("hosts", &r.hosts));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("data");
    EK_RETURN_IF_ERROR(t.Str("pack_dir", &r.pack_dir));
    EK_RETURN_IF_ERROR(t.Str("cache_dir", &r.cache_dir));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("model");
    EK_RETURN_IF_ERROR(t.Str("name", &r.model_name));
    EK_RETURN_IF_ERROR(t.Num("params", &r.params));
    EK_RETURN_IF_ERROR(t.Str("config", &r.config));
    EK_RETURN_IF_ERROR(t.Bool("gradient_checkpointing", &r.gradient_checkpointing));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("train");
    EK_RETURN_IF_ERROR(t.Int("seq_len", &r.seq_len));
    EK_RETURN_IF_ERROR(t.Int("micro_batch", &r.micro_batch));
    EK_RETURN_IF_ERROR(t.Int("grad_accum", &r.grad_accum));
    EK_RETURN_IF_ERROR(t.Int("epochs", &r.epochs));
    EK_RETURN_IF_ERROR(t.Int("warmup_steps", &r.warmup_steps));
    EK_RETURN_IF_ERROR(t.Int("save_every", &r.save_every));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("checkpoint");
    EK_RETURN_IF_ERROR(t.Str("dir", &r.checkpoint_dir));
    EK_RETURN_IF_ERROR(t.Int("keep", &r.keep));
    EK_RETURN_IF_ERROR(t.Num("write_gbps", &r.write_gbps));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("evenfix");
    std::string mode = "min";
    EK_RETURN_IF_ERROR(t.Str("mode", &mode));
    EK_RETURN_IF_ERROR(t.NoOthers());
    auto m = ParseEvenfixMode(mode);
    if (!m.ok()) return m.status().WithContext(name + ": evenfix.mode");
    r.evenfix = *m;
  }
  {
    Table t = table("distributed");
    EK_RETURN_IF_ERROR(t.Str("backend", &r.backend));
    EK_RETURN_IF_ERROR(t.Num("watchdog_timeout_min", &r.watchdog_timeout_min));
    EK_RETURN_IF_ERROR(t.Num("watchdog_floor_min", &r.watchdog_floor_min));
    EK_RETURN_IF_ERROR(t.Bool("require_flight_recorder", &r.require_flight_recorder));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("gpu");
    EK_RETURN_IF_ERROR(t.Num("memory_gb", &r.memory_gb));
    EK_RETURN_IF_ERROR(t.Num("headroom", &r.headroom));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("watch");
    EK_RETURN_IF_ERROR(t.Num("poll_s", &r.watch_poll_s));
    EK_RETURN_IF_ERROR(t.Num("hang_floor_s", &r.hang_floor_s));
    EK_RETURN_IF_ERROR(t.Num("hang_factor", &r.hang_factor));
    EK_RETURN_IF_ERROR(t.Num("checkpoint_allowance_s", &r.checkpoint_allowance_s));
    EK_RETURN_IF_ERROR(t.Num("throughput_floor_tok_s", &r.throughput_floor_tok_s));
    EK_RETURN_IF_ERROR(t.Int("throughput_samples", &r.throughput_samples));
    EK_RETURN_IF_ERROR(t.Num("stale_after_s", &r.stale_after_s));
    EK_RETURN_IF_ERROR(t.Str("heartbeat_dir", &r.heartbeat_dir));
    EK_RETURN_IF_ERROR(t.Str("profile", &r.watch_profile));
    int final_step = 0;
    EK_RETURN_IF_ERROR(t.Int("final_step", &final_step));
    r.final_step = final_step;
    EK_RETURN_IF_ERROR(t.Num("agent_timeout_s", &r.agent_timeout_s));
    EK_RETURN_IF_ERROR(t.Str("state_dir", &r.watch_state_dir));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  {
    Table t = table("alert");
    EK_RETURN_IF_ERROR(t.Str("alertmanager_url", &r.alertmanager_url));
    EK_RETURN_IF_ERROR(t.Str("webhook_url", &r.webhook_url));
    EK_RETURN_IF_ERROR(t.Str("command", &r.alert_command));
    EK_RETURN_IF_ERROR(t.Num("backoff_s", &r.alert_backoff_s));
    EK_RETURN_IF_ERROR(t.Num("backoff_max_s", &r.alert_backoff_max_s));
    EK_RETURN_IF_ERROR(t.Num("resend_s", &r.alert_resend_s));
    EK_RETURN_IF_ERROR(t.NoOthers());
  }
  if (r.cache_dir.empty()) r.cache_dir = r.pack_dir;
  EK_RETURN_IF_ERROR(ValidateRunFile(r));
  return r;
}

Result<RunFile> ReadRunFile(const std::string& path) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseRunFile(text, path);
}

}  // namespace ek::gate
