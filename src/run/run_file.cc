#define TOML_EXCEPTIONS 0
#include "run/run_file.h"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <variant>

#include "core/file.h"
#include "core/json_out.h"
#include "run/toml_hazards.h"

namespace ek::run {

Result<EvenfixMode> ParseEvenfixMode(std::string_view s) {
  if (s == "min") return EvenfixMode::kMin;
  if (s == "pad") return EvenfixMode::kPad;
  if (s == "off") return EvenfixMode::kOff;
  return InvalidArgumentError(fmt::format("evenfix mode '{}' (min, pad, off)", s));
}

std::string_view EvenfixModeName(EvenfixMode m) {
  switch (m) {
    case EvenfixMode::kMin:
      return "min";
    case EvenfixMode::kPad:
      return "pad";
    case EvenfixMode::kOff:
      return "off";
  }
  return "min";
}

std::string RunFile::Resolve(const std::string& p) const {
  if (p.empty() || p[0] == '/' || path.empty()) return p;
  return std::filesystem::path(path).replace_filename(p).string();  // beside the run file
}

std::string RunFile::ConfigPath() const {
  if (!config.empty()) return Resolve(config);
  if (!model_path.empty()) return Resolve(model_path) + "/config.json";
  return "";
}

std::string RunFile::Identity() const {
  return fmt::format("{} (xxh3 {:016x})", path.empty() ? "run" : path, xxh3);
}

namespace {

// One key of the file: where it lives in RunFile, and how it is read and shown.
using Member = std::variant<int RunFile::*, int64_t RunFile::*, double RunFile::*, bool RunFile::*,
                            std::string RunFile::*, std::vector<std::string> RunFile::*,
                            EvenfixMode RunFile::*>;
struct Key {
  const char* section;
  const char* name;
  Member member;
  bool is_path = false;  // resolved against the run file in RunFileToJson
  // A number's range, checked where the key is read so the error names its line.
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
};

// The whole schema, in the order of docs/run_format.md.
const Key kKeys[] = {
    {"run", "name", &RunFile::name},
    {"cluster", "nodes", &RunFile::nodes},
    {"cluster", "gpus_per_node", &RunFile::gpus_per_node},
    {"cluster", "hosts", &RunFile::hosts},
    {"data", "pack_dir", &RunFile::pack_dir, true},
    {"data", "cache_dir", &RunFile::cache_dir, true},
    {"data", "shard", &RunFile::shard},
    {"data", "chat_template", &RunFile::chat_template},
    {"data", "loss_mask", &RunFile::loss_mask},
    {"data", "attention", &RunFile::attention},
    {"data", "mixture_seed", &RunFile::mixture_seed},
    {"data", "mixture_tokens", &RunFile::mixture_tokens},
    {"data", "packing", &RunFile::packing},
    {"data", "packing_seed", &RunFile::packing_seed},
    {"model", "name", &RunFile::model_name},
    {"model", "path", &RunFile::model_path, true},
    {"model", "params", &RunFile::params},
    {"model", "config", &RunFile::config, true},
    {"model", "gradient_checkpointing", &RunFile::gradient_checkpointing},
    {"train", "seq_len", &RunFile::seq_len},
    {"train", "micro_batch", &RunFile::micro_batch},
    {"train", "grad_accum", &RunFile::grad_accum},
    {"train", "epochs", &RunFile::epochs},
    {"train", "max_steps", &RunFile::max_steps},
    {"train", "warmup_steps", &RunFile::warmup_steps},
    {"train", "save_every", &RunFile::save_every},
    {"train", "lr", &RunFile::lr},
    {"train", "weight_decay", &RunFile::weight_decay},
    {"train", "min_lr_ratio", &RunFile::min_lr_ratio},
    {"train", "max_grad_norm", &RunFile::max_grad_norm},
    {"train", "seed", &RunFile::seed},
    {"train", "shuffle", &RunFile::shuffle},
    {"train", "precision", &RunFile::precision},
    {"train", "log_every", &RunFile::log_every},
    {"checkpoint", "dir", &RunFile::checkpoint_dir, true},
    {"checkpoint", "keep", &RunFile::keep},
    {"checkpoint", "write_gbps", &RunFile::write_gbps},
    {"checkpoint", "shard_size_gb", &RunFile::shard_size_gb},
    {"checkpoint", "resume", &RunFile::resume},
    {"evenfix", "mode", &RunFile::evenfix},
    {"evenfix", "max_drop_pct", &RunFile::evenfix_max_drop_pct, false, 0, 100},
    {"distributed", "backend", &RunFile::backend},
    {"distributed", "watchdog_timeout_min", &RunFile::watchdog_timeout_min},
    {"distributed", "watchdog_floor_min", &RunFile::watchdog_floor_min},
    {"distributed", "require_flight_recorder", &RunFile::require_flight_recorder},
    {"gpu", "memory_gb", &RunFile::memory_gb},
    {"gpu", "headroom", &RunFile::headroom},
    {"watch", "poll_s", &RunFile::watch_poll_s},
    {"watch", "hang_floor_s", &RunFile::hang_floor_s},
    {"watch", "hang_factor", &RunFile::hang_factor},
    {"watch", "checkpoint_allowance_s", &RunFile::checkpoint_allowance_s},
    {"watch", "throughput_floor_tok_s", &RunFile::throughput_floor_tok_s},
    {"watch", "throughput_samples", &RunFile::throughput_samples},
    {"watch", "stale_after_s", &RunFile::stale_after_s},
    {"watch", "heartbeat_dir", &RunFile::heartbeat_dir, true},
    {"watch", "profile", &RunFile::watch_profile},
    {"watch", "final_step", &RunFile::final_step},
    {"watch", "agent_timeout_s", &RunFile::agent_timeout_s},
    {"watch", "state_dir", &RunFile::watch_state_dir, true},
    {"watch", "desync_s", &RunFile::desync_s},
    {"alert", "alertmanager_url", &RunFile::alertmanager_url},
    {"alert", "webhook_url", &RunFile::webhook_url},
    {"alert", "command", &RunFile::alert_command},
    {"alert", "backoff_s", &RunFile::alert_backoff_s},
    {"alert", "backoff_max_s", &RunFile::alert_backoff_max_s},
    {"alert", "resend_s", &RunFile::alert_resend_s},
    {"launch", "torchrun", &RunFile::launch_torchrun},
    {"launch", "python", &RunFile::launch_python},
    {"launch", "trainer", &RunFile::launch_trainer, true},
    {"launch", "rdzv_endpoint", &RunFile::rdzv_endpoint},
    {"launch", "rdzv_port", &RunFile::rdzv_port},
    {"launch", "run_id", &RunFile::run_id},
    {"launch", "dir", &RunFile::launch_dir, true},
    {"launch", "gate_timeout_s", &RunFile::gate_timeout_s},
    {"launch", "flight_recorder_entries", &RunFile::flight_recorder_entries},
    {"launch", "omp_threads", &RunFile::omp_threads},
    {"launch", "stop_grace_s", &RunFile::stop_grace_s},
    {"retry", "max_restarts", &RunFile::max_restarts},
    {"retry", "max_no_progress", &RunFile::max_no_progress},
    {"retry", "backoff_s", &RunFile::retry_backoff_s},
    {"retry", "backoff_max_s", &RunFile::retry_backoff_max_s},
};

struct Reader {
  const std::string& file;
  RunFile* r;
  const std::string* set = nullptr;  // the --set text the value came from; null: the file

  // "run.toml: train.lr (line 12)", or "run.toml: train.lr (--set train.lr=fast)".
  std::string Where(const Key& k, const toml::node& n) const {
    if (set) return fmt::format("{}: {}.{} (--set {})", file, k.section, k.name, *set);
    return fmt::format("{}: {}.{} (line {})", file, k.section, k.name, n.source().begin.line);
  }
  Status Type(const Key& k, const toml::node& n, std::string_view want) const {
    return InvalidArgumentError(fmt::format("{} must be {}", Where(k, n), want));
  }

  // An integer node only: toml++ 3.3's value<int64_t>() of a float casts it unchecked (1e308
  // is undefined behaviour; found by fuzz/fuzz_run_file).
  Status operator()(const Key& k, const toml::node& n, int RunFile::*m) const {
    if (!n.is_integer()) return Type(k, n, "an integer");
    auto v = n.value<int64_t>();
    if (!v) return Type(k, n, "an integer");
    if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
      return Type(k, n, "an integer of at most 10 digits");
    }
    r->*m = static_cast<int>(*v);
    return Status::Ok();
  }
  Status operator()(const Key& k, const toml::node& n, int64_t RunFile::*m) const {
    if (!n.is_integer()) return Type(k, n, "an integer");
    auto v = n.value<int64_t>();
    if (!v) return Type(k, n, "an integer");
    r->*m = *v;
    return Status::Ok();
  }
  Status operator()(const Key& k, const toml::node& n, double RunFile::*m) const {
    auto v = n.value<double>();
    if (!n.is_number() || !v || !std::isfinite(*v)) return Type(k, n, "a number");
    if (*v < k.lo || *v > k.hi)
      return Type(k, n, fmt::format("a number in [{}, {}], not {}", k.lo, k.hi, *v));
    r->*m = *v;
    return Status::Ok();
  }
  Status operator()(const Key& k, const toml::node& n, bool RunFile::*m) const {
    auto v = n.value<bool>();
    if (!n.is_boolean() || !v) return Type(k, n, "true or false");
    r->*m = *v;
    return Status::Ok();
  }
  Status operator()(const Key& k, const toml::node& n, std::string RunFile::*m) const {
    auto v = n.value<std::string>();
    if (!n.is_string() || !v) return Type(k, n, "a string");
    r->*m = *v;
    return Status::Ok();
  }
  Status operator()(const Key& k, const toml::node& n, std::vector<std::string> RunFile::*m) const {
    const toml::array* a = n.as_array();
    if (!a) return Type(k, n, "an array of strings");
    std::vector<std::string> out;
    for (const auto& e : *a) {
      auto v = e.value<std::string>();
      if (!e.is_string() || !v) return Type(k, n, "an array of strings");
      out.push_back(*v);
    }
    r->*m = std::move(out);
    return Status::Ok();
  }
  Status operator()(const Key& k, const toml::node& n, EvenfixMode RunFile::*m) const {
    auto v = n.value<std::string>();
    if (!n.is_string() || !v) return Type(k, n, "a string (min, pad, off)");
    auto mode = ParseEvenfixMode(*v);
    if (!mode.ok()) {
      return mode.status().WithContext(Where(k, n));
    }
    r->*m = *mode;
    return Status::Ok();
  }
};

void WriteValue(JsonWriter& w, const RunFile& r, const Key& k) {
  std::visit(
      [&](auto m) {
        using T = std::decay_t<decltype(r.*m)>;
        const T& v = r.*m;
        if constexpr (std::is_same_v<T, std::string>) {
          w.Str(k.is_path ? r.Resolve(v) : v);
        } else if constexpr (std::is_same_v<T, bool>) {
          w.Bool(v);
        } else if constexpr (std::is_same_v<T, double>) {
          w.Double(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          w.StrArray(v);
        } else if constexpr (std::is_same_v<T, EvenfixMode>) {
          w.Str(EvenfixModeName(v));
        } else {
          w.Int(v);
        }
      },
      k.member);
}

// [[data.source]]: an array of tables, each checked key by key as the rest of the file.
Status ReadSources(const toml::node& node, const std::string& file, RunFile* r) {
  const toml::array* list = node.as_array();
  const int at = node.source().begin.line;
  if (!list || !list->is_array_of_tables()) {
    return InvalidArgumentError(fmt::format(
        "{}: data.source (line {}) must be an array of tables: one [[data.source]] per source",
        file, at));
  }
  for (const toml::node& entry : *list) {
    const toml::table& t = *entry.as_table();
    DataSource src;
    src.line = t.source().begin.line;
    auto where = [&](std::string_view key, const toml::node& n) {
      return fmt::format("{}: data.source[{}].{} (line {})", file, r->sources.size(), key,
                         n.source().begin.line);
    };
    auto str = [&](std::string_view key, const toml::node& n, std::string* out) -> Status {
      auto v = n.value<std::string>();
      if (!n.is_string() || !v) return InvalidArgumentError(where(key, n) + " must be a string");
      *out = *v;
      return Status::Ok();
    };
    auto map = [&](std::string_view key, const toml::node& n,
                   std::vector<std::pair<std::string, std::string>>* out) -> Status {
      const toml::table* m = n.as_table();
      if (!m) {
        return InvalidArgumentError(
            where(key, n) + " must be a table of strings, e.g. { messages = \"conversations\" }");
      }
      // toml++ keeps a table's keys sorted; the file's order is the user's.
      std::vector<std::pair<std::string_view, const toml::node*>> keys;
      for (const auto& [k, v] : *m) keys.emplace_back(k.str(), &v);
      std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
        const auto &pa = a.second->source().begin, &pb = b.second->source().begin;
        return std::pair(pa.line, pa.column) < std::pair(pb.line, pb.column);
      });
      for (const auto& [k, vp] : keys) {
        const toml::node& v = *vp;
        auto s = v.value<std::string>();
        if (!v.is_string() || !s) {
          return InvalidArgumentError(
              fmt::format("{}: data.source[{}].{}.{} (line {}) must be a string", file,
                          r->sources.size(), key, k, v.source().begin.line));
        }
        out->emplace_back(std::string(k), *s);
      }
      return Status::Ok();
    };
    for (const auto& [key, n] : t) {
      const std::string_view k = key.str();
      if (k == "name") {
        EK_RETURN_IF_ERROR(str(k, n, &src.name));
      } else if (k == "path") {
        EK_RETURN_IF_ERROR(str(k, n, &src.path));
      } else if (k == "format") {
        EK_RETURN_IF_ERROR(str(k, n, &src.format));
      } else if (k == "split") {
        EK_RETURN_IF_ERROR(str(k, n, &src.split));
      } else if (k == "shape") {
        EK_RETURN_IF_ERROR(str(k, n, &src.shape));
      } else if (k == "text_field") {
        EK_RETURN_IF_ERROR(str(k, n, &src.text_field));
      } else if (k == "columns") {
        EK_RETURN_IF_ERROR(map(k, n, &src.columns));
      } else if (k == "tags") {
        EK_RETURN_IF_ERROR(map(k, n, &src.tags));
      } else if (k == "weight") {
        auto v = n.value<double>();
        if (!n.is_number() || !v || !std::isfinite(*v) || *v <= 0) {
          return InvalidArgumentError(where(k, n) + " must be a positive number");
        }
        src.weight = *v;
      } else if (k == "epochs") {
        auto v = n.is_integer() ? n.value<int64_t>() : std::nullopt;
        if (!v || *v < 1 || *v > 1000000) {
          return InvalidArgumentError(where(k, n) + " must be a whole number of passes (>= 1)");
        }
        src.epochs = static_cast<int>(*v);
      } else {
        return InvalidArgumentError(fmt::format(
            "{}: unknown key data.source[{}].{} (line {}); a source has name, path, format, "
            "split, shape, text_field, columns, tags, weight, epochs",
            file, r->sources.size(), k, n.source().begin.line));
      }
    }
    if (src.path.empty()) {
      return InvalidArgumentError(fmt::format("{}: data.source[{}] (line {}) has no path", file,
                                              r->sources.size(), src.line));
    }
    if (src.weight > 0 && src.epochs > 0) {
      return InvalidArgumentError(fmt::format(
          "{}: data.source[{}] (line {}) has both weight and epochs: a source takes a share of "
          "the tokens (weight) or whole passes (epochs), not both",
          file, r->sources.size(), src.line));
    }
    r->sources.push_back(std::move(src));
  }
  return Status::Ok();
}

const Key* FindKey(std::string_view section, std::string_view name) {
  for (const Key& k : kKeys) {
    if (section == k.section && name == k.name) return &k;
  }
  return nullptr;
}

Status ReadKey(const Key& k, const toml::node& n, const Reader& reader) {
  return std::visit([&](auto m) { return reader(k, n, m); }, k.member);
}

// One "section.key=value" on top of the file: the key is looked up and its value checked
// as the file's would be. The value is parsed as a TOML value ("v = VALUE"); text that is
// not one (a path, a word) is that text as a string, so `evenfix.mode=off` needs no quotes
// while `run.name=123` is an integer, refused as a file's `name = 123` would be.
Status ApplyOverride(const std::string& text, const std::string& name, RunFile* r) {
  const size_t eq = text.find('=');
  const std::string_view key =
      std::string_view(text).substr(0, eq == std::string::npos ? text.size() : eq);
  const size_t dot = key.find('.');
  if (eq == std::string::npos || dot == std::string_view::npos || dot == 0 ||
      dot + 1 == key.size()) {
    return InvalidArgumentError(
        fmt::format("{}: --set {}: not section.key=value (e.g. --set train.lr=2e-5)", name, text));
  }
  const Key* k = FindKey(key.substr(0, dot), key.substr(dot + 1));
  if (!k && key.starts_with("data.source")) {
    return InvalidArgumentError(fmt::format(
        "{}: --set {}: the sources are [[data.source]] tables of the file, not set one key at a "
        "time",
        name, text));
  }
  if (!k) {
    return InvalidArgumentError(fmt::format("{}: unknown key {} (--set {})", name, key, text));
  }
  const std::string value = text.substr(eq + 1);
  if (value.find_first_of("\r\n") != std::string::npos) {
    return InvalidArgumentError(fmt::format("{}: {}.{} (--set {}): the value has a line break",
                                            name, k->section, k->name, text));
  }
  Reader reader{name, r, &text};
  const std::string doc = "v = " + value;
  // toml++ must not see what CheckTomlppHazards refuses: a non-ASCII word is a string.
  if (CheckTomlppHazards(doc, name).ok()) {
    toml::parse_result parsed = toml::parse(doc, name);
    if (parsed && parsed.table().size() == 1) {
      if (const toml::node* n = parsed.table().get("v")) return ReadKey(*k, *n, reader);
    }
  }
  return ReadKey(*k, toml::value<std::string>(value), reader);
}

}  // namespace

Result<RunFile> ParseRunFile(std::string_view text, const std::string& name,
                             const std::vector<std::string>& overrides) {
  EK_RETURN_IF_ERROR(CheckTomlppHazards(text, name));
  toml::parse_result parsed = toml::parse(text, name);
  if (!parsed) {
    const auto& err = parsed.error();
    return InvalidArgumentError(fmt::format("{}: line {}, column {}: {}", name,
                                            err.source().begin.line, err.source().begin.column,
                                            err.description()));
  }
  const toml::table& root = parsed.table();
  RunFile r;
  r.path = name;
  r.xxh3 = XXH3_64bits(text.data(), text.size());
  std::set<std::string> sections;
  for (const Key& k : kKeys) sections.insert(k.section);
  for (const auto& [k, v] : root) {
    if (!sections.count(std::string(k.str()))) {
      return InvalidArgumentError(
          fmt::format("{}: unknown key {} (line {})", name, k.str(), v.source().begin.line));
    }
    const toml::table* t = v.as_table();
    if (!t) {
      return InvalidArgumentError(
          fmt::format("{}: {} (line {}) must be a table", name, k.str(), v.source().begin.line));
    }
    for (const auto& [key, node] : *t) {
      if (k.str() == "data" && key.str() == "source") {
        EK_RETURN_IF_ERROR(ReadSources(node, name, &r));
        continue;
      }
      const Key* found = FindKey(k.str(), key.str());
      if (!found) {
        return InvalidArgumentError(fmt::format("{}: unknown key {}.{} (line {})", name, k.str(),
                                                key.str(), node.source().begin.line));
      }
      EK_RETURN_IF_ERROR(ReadKey(*found, node, Reader{name, &r}));
    }
  }
  for (const std::string& o : overrides) EK_RETURN_IF_ERROR(ApplyOverride(o, name, &r));
  r.overrides = overrides;
  if (r.cache_dir.empty()) r.cache_dir = r.pack_dir;
  if (Status st = ValidateRunFile(r); !st.ok()) {
    if (overrides.empty()) return st;
    return InvalidArgumentError(
        fmt::format("{} (with --set {})", st.message(), fmt::join(overrides, ", --set ")));
  }
  return r;
}

Result<RunFile> ReadRunFile(const std::string& path, const std::vector<std::string>& overrides) {
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseRunFile(text, path, overrides);
}

namespace {

void WriteSources(JsonWriter& w, const RunFile& r) {
  auto map = [&](const std::vector<std::pair<std::string, std::string>>& m) {
    w.BeginObject();
    for (const auto& [k, v] : m) w.Key(k).Str(v);
    w.EndObject();
  };
  w.Key("source").BeginArray();
  for (const DataSource& s : r.sources) {
    w.BeginObject().Key("name").Str(s.name).Key("path").Str(r.Resolve(s.path));
    w.Key("format").Str(s.format).Key("split").Str(s.split).Key("shape").Str(s.shape);
    w.Key("text_field").Str(s.text_field).Key("columns");
    map(s.columns);
    w.Key("tags");
    map(s.tags);
    w.Key("weight").Double(s.weight).Key("epochs").Int(s.epochs).Key("line").Int(s.line);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

std::string RunFileToJson(const RunFile& r) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("path").Str(r.path).Key("xxh3").Str(fmt::format("{:016x}", r.xxh3));
  w.Key("world").Int(r.world()).Key("config_path").Str(r.ConfigPath());
  w.Key("overrides").StrArray(r.overrides);
  // One object per section, in kKeys' order (the keys of a section are adjacent).
  std::string section;
  for (const Key& k : kKeys) {
    if (section != k.section) {
      if (section == "data") WriteSources(w, r);
      if (!section.empty()) w.EndObject();
      section = k.section;
      w.Key(section).BeginObject();
    }
    w.Key(k.name);
    WriteValue(w, r, k);
  }
  if (!section.empty()) w.EndObject();
  return w.EndObject().str();
}

}  // namespace ek::run
