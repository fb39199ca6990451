// The gate exchange of a launch: each node's part, node 0's merge and verdict, the
// other nodes waiting for it (docs/launch.md).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_out.h"
#include "core/parse.h"
#include "gate/gate.h"
#include "launch/launcher_internal.h"
#include "packfile/manifest.h"

namespace ek::launch::detail {

namespace {

// The launcher's Env with the variables the ranks get set over its own: the
// gate checks the environment the trainer will run in.
class RankVarsEnv final : public EnvWrapper {
 public:
  RankVarsEnv(Env* base, std::vector<std::pair<std::string, std::string>> vars)
      : EnvWrapper(base), vars_(std::move(vars)) {}
  std::optional<std::string> GetVar(const std::string& name) override {
    for (const auto& [key, v] : vars_) {
      if (key == name) return v;
    }
    return target()->GetVar(name);
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

}  // namespace

Result<bool> Launcher::Gate(int* first_attempt, int* exit_code) {
  RankVarsEnv rank_env(o_.files, RankEnv(1));
  gate::GateEnv genv;
  genv.env = &rank_env;
  const bool multi = run_.nodes > 1;
  say_(
      fmt::format("launch: gate ({}{})",
                  multi ? fmt::format("node {} of {}", cluster_.node_rank, run_.nodes) : "one node",
                  cluster_.slurm_job_id.empty() ? "" : ", SLURM job " + cluster_.slurm_job_id));
  auto part = gate::RunGate(run_, multi ? cluster_.node_rank : -1, genv);
  if (!part.ok()) {
    say_("launch: gate error: " + part.status().message());
    *exit_code = kExitGateRefused;
    return false;
  }
  const std::string gate_dir = paths_.session + "/gate";
  const std::string verdict_path = gate_dir + "/verdict.json";
  if (Status st = MakeDirs(gate_dir, o_.files); !st.ok())
    return st.WithContext("launch: cannot make " + gate_dir);
  std::string verdict_text;
  int next = 1;
  if (cluster_.node_rank == 0) {
    for (const auto& name : ListNames(o_.files, paths_.session)) {
      if (name.starts_with("attempt-")) next = std::max(next, std::atoi(name.c_str() + 8) + 1);
    }
  }
  if (!multi) {
    gate::GateReport rep = *part;
    if (Status st = gate::WriteGateLog(paths_.ckpt_dir + "/gate-log.json", rep, o_.files);
        !st.ok()) {
      say_("launch: warning: " + st.message());
    }
    say_(gate::GateReportToText(rep));
    bool fail = rep.overall() == gate::Verdict::kFail;
    GateVerdict verdict;
    verdict.overall = rep.overall();
    verdict.accepted = fail && o_.accept_gate_fail;
    verdict.first_attempt = next;
    EK_RETURN_IF_ERROR(WriteRecord(verdict_path, GateVerdictToJson(verdict)));
    if (fail && !o_.accept_gate_fail) {
      say_("launch: the gate refused the run: nothing was started");
      *exit_code = kExitGateRefused;
      return false;
    }
    if (fail)
      say_(
          "launch: warning: gate FAIL accepted (--accept-gate-fail): starting an unsafe run as "
          "asked");
    *first_attempt = next;
    return true;
  }
  // Several nodes: parts and the verdict travel through the session directory.
  // The part, tagged first with this launcher's nonce and start time.
  JsonWriter part_writer(JsonWriter::kSpaced);
  part_writer.BeginObject(JsonWriter::kLines).Key("launch_nonce").Str(nonce_);
  part_writer.Key("launch_started").Fixed(started_, 3);
  gate::WriteGateReportMembers(part_writer, *part);
  const std::string part_json = part_writer.EndObject().Line();
  const std::string my_part = fmt::format("{}/node-{}.json", gate_dir, cluster_.node_rank);
  if (cluster_.node_rank == 0) {
    // A new session: no verdict, no part from before this launch.
    // A stale part left behind would be merged as this launch's. Only the records
    // themselves go: another node may be writing its part right now, and removing
    // its temp file would fail that node's rename (it rewrites a part removed here).
    for (const auto& name : ListNames(o_.files, gate_dir)) {
      const bool record =
          name == "verdict.json" || (name.starts_with("node-") && name.ends_with(".json"));
      if (!record) continue;
      if (Status st = o_.files->RemoveFile(gate_dir + "/" + name); !st.ok()) {
        return st.WithContext("launch: cannot clear the previous launch's gate record");
      }
    }
    EK_RETURN_IF_ERROR(WriteRecord(my_part, part_json));
    std::map<int, gate::GateReport> parts;
    std::map<int, std::string> nonces;
    std::vector<std::string>
        unreadable;  // parts that exist but cannot be read: "file: field: what"
    std::map<int, bool> done;
    bool all = WaitFor(o_.files->clock(), run_.gate_timeout_s, [&] {
      for (int n = 0; n < run_.nodes; ++n) {
        if (done.count(n)) continue;
        std::string p = fmt::format("{}/node-{}.json", gate_dir, n);
        auto text = ReadIfExists(p);
        if (text.ok() && !*text) continue;  // not written yet
        Result<gate::GateReport> rep =
            text.ok() ? gate::GateReportFromJson(**text, p) : text.status();
        Result<std::string> nonce = rep.ok() ? GatePartNonce(**text, p) : rep.status();
        done[n] = true;
        if (!nonce.ok()) {
          unreadable.push_back(nonce.status().message());
          continue;
        }
        parts[n] = *rep;
        nonces[n] = *nonce;
      }
      return static_cast<int>(done.size()) == run_.nodes;
    });
    std::vector<gate::GateReport> reps;
    for (auto& [n, r] : parts) reps.push_back(r);
    gate::Verdict overall = gate::Verdict::kFail;
    std::string reasons;
    std::vector<int64_t> missing;
    for (int n = 0; n < run_.nodes; ++n) {
      if (!done.count(n)) missing.push_back(n);
    }
    std::string text;
    if (!unreadable.empty()) {
      reasons = fmt::format("unreadable gate part(s): {}", fmt::join(unreadable, " | "));
    } else if (!all) {
      reasons = fmt::format("node(s) {} did not report a gate part within {:.0f} s{}",
                            CompactRanges(missing), run_.gate_timeout_s,
                            StopSignalReceived() ? " (stopped)" : "");
    } else {
      auto merged = gate::MergeGateReports(reps, &run_);
      if (!merged.ok()) {
        reasons = merged.status().message();
      } else {
        if (!has_plan_ && static_cast<int>(merged->rank_blocks.size()) == run_.world()) {
          std::vector<uint64_t> blocks;
          for (const auto& [rank, count] : merged->rank_blocks) blocks.push_back(count);
          if (auto schedule = run::MakeSchedule(run_, blocks); schedule.ok()) {
            plan_ = std::move(*schedule);
            has_plan_ = true;
          }
        }
        overall = merged->overall();
        text = gate::GateReportToText(*merged);
        for (const auto& c : merged->checks) {
          if (c.verdict == gate::Verdict::kFail)
            reasons += (reasons.empty() ? "" : " | ") + c.name + ": " + c.reason;
        }
        if (Status st = gate::WriteGateLog(paths_.ckpt_dir + "/gate-log.json", *merged, o_.files);
            !st.ok()) {
          say_("launch: warning: " + st.message());
        }
      }
    }
    bool fail = overall == gate::Verdict::kFail;
    verdict_text =
        GateVerdictToJson({overall, fail && o_.accept_gate_fail, next, reasons, text, nonces});
    EK_RETURN_IF_ERROR(WriteRecord(verdict_path, verdict_text));
  } else {
    Status written;
    bool got = WaitFor(o_.files->clock(), run_.gate_timeout_s + 30, [&] {
      auto text = ReadFile(my_part);
      if (!text.ok() || text->find(nonce_) == std::string::npos) {
        written = WriteRecord(my_part, part_json);
        if (!written.ok()) return true;  // node 0 will not hear from this node: stop now
      }
      auto v = ReadFile(verdict_path);
      if (!v.ok() || v->find(JsonString(nonce_)) == std::string::npos) return false;
      verdict_text = *v;
      return true;
    });
    EK_RETURN_IF_ERROR(written);
    if (!got) {
      say_(fmt::format("launch: no gate verdict from node 0 within {:.0f} s: nothing was started",
                       run_.gate_timeout_s + 30));
      *exit_code = kExitGateRefused;
      return false;
    }
  }
  auto read = GateVerdictFromJson(verdict_text, verdict_path);
  if (read.ok() && multi) {
    auto mine = read->parts.find(cluster_.node_rank);
    if (mine == read->parts.end() || mine->second != nonce_) {
      read = CorruptError(
          mine == read->parts.end()
              ? fmt::format("{}: parts.{}: missing (the verdict does not name this node's part)",
                            verdict_path, cluster_.node_rank)
              : fmt::format("{}: parts.{}: {} is not this launcher's nonce {}", verdict_path,
                            cluster_.node_rank, JsonString(mine->second), JsonString(nonce_)));
    }
  }
  if (!read.ok()) {
    say_("launch: unreadable gate verdict: " + read.status().message());
    *exit_code = kExitBadInput;
    return false;
  }
  const GateVerdict& v = *read;
  if (!v.text.empty()) say_(v.text);
  if (v.overall == gate::Verdict::kFail) {
    say_("launch: gate FAIL: " + v.reasons);
    if (v.accepted) {
      say_(
          "launch: warning: gate FAIL accepted (--accept-gate-fail): starting an unsafe run as "
          "asked");
    } else {
      say_("launch: the gate refused the run on every node: nothing was started");
      *exit_code = kExitGateRefused;
      return false;
    }
  }
  *first_attempt = v.first_attempt;
  return true;
}

}  // namespace ek::launch::detail
