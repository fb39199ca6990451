// The session's attempts before this launcher's (earlier launchers', one that died
// among them), read back for the summary's totals.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json_check.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/parse.h"
#include "launch/launcher_internal.h"

namespace ek::launch::detail {

double ModifiedAt(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
}

void Launcher::ReadEarlierAttempts(int first_attempt) {
  std::vector<ckpt::CheckpointEntry> checkpoints;
  if (auto list = ckpt::ListCheckpoints(paths_.ckpt_dir, ckpt::VerifyLevel::kStructure); list.ok())
    checkpoints = *list;
  for (const auto& name : ListNames(o_.files, paths_.session)) {
    if (!name.starts_with("attempt-")) continue;
    auto n = ParseIntIn(std::string_view(name).substr(8), 1, std::numeric_limits<int>::max());
    if (!n || *n >= first_attempt) continue;
    const std::string path = fmt::format("{}/{}/attempt.json", paths_.session, name);
    auto text = ReadIfExists(path);
    if (text.ok() && *text) {
      auto account = AttemptAccountFromJson(**text, path);
      if (account.ok()) {
        EarlierAttempt e{account->attempt,
                         account->start,
                         account->end,
                         account->gpu_hours,
                         account->gpu_hours_lost,
                         false,
                         account->causes,
                         Flagged(account->json, true, false)};
        earlier_.push_back(std::move(e));
        continue;
      }
      // A record that cannot be read is not counted twice: its attempt is reconstructed instead,
      // and said.
      say_("launch: warning: " + account.status().message() +
           "; counting the attempt from its other records");
    }
    earlier_.push_back(ReconstructAttempt(static_cast<int>(*n), checkpoints));
  }
  std::sort(earlier_.begin(), earlier_.end(),
            [](const EarlierAttempt& a, const EarlierAttempt& b) { return a.attempt < b.attempt; });
  for (const auto& e : earlier_) {
    if (e.inferred) {
      say_(
          fmt::format("launch: attempt {} of an earlier launch has no attempt.json (its launcher "
                      "died): counted as "
                      "{:.0f} s from its last records ({:.4f} GPU-hours, inferred)",
                      e.attempt, e.end - e.start, e.gpu_hours));
    }
  }
}

EarlierAttempt Launcher::ReconstructAttempt(int attempt,
                                            const std::vector<ckpt::CheckpointEntry>& checkpoints) {
  const std::string dir = paths_.Attempt(attempt);
  EarlierAttempt e;
  e.attempt = attempt;
  e.inferred = true;
  std::string first_from, last_from;
  auto widen = [&](double t, const std::string& from) {
    if (t <= 0) return;
    if (e.start == 0 || t < e.start) {
      e.start = t;
      first_from = from;
    }
    if (t > e.end) {
      e.end = t;
      last_from = from;
    }
  };
  std::vector<std::string> ranks;
  std::map<int, bool> have_cause;
  for (const auto& name : ListNames(o_.files, dir)) {
    const std::string p = dir + "/" + name;
    if (name.starts_with("node-") && name.ends_with(".json")) {
      auto text = ReadIfExists(p);
      auto rec = text.ok() && *text ? NodeRecordFromJson(**text, p)
                                    : Result<NodeRecord>(CorruptError(p + ": unreadable"));
      if (!rec.ok()) {
        say_("launch: warning: " + rec.status().message());
        continue;
      }
      widen(rec->start, name + " start");
      widen(rec->end, name + " end");
      for (const auto& c : rec->causes) {
        e.causes.push_back(c);
        have_cause[c.rank] = true;
      }
    } else if (name.starts_with("rank-") && name.ends_with(".json")) {
      auto text = ReadIfExists(p);
      auto rr = text.ok() && *text ? RankRecordFromJson(**text, p)
                                   : Result<RankRecord>(CorruptError(p + ": unreadable"));
      if (!rr.ok()) {
        say_("launch: warning: " + rr.status().message());
        continue;
      }
      widen(rr->start, name + " start");
      widen(rr->end, name + " end");
      widen(rr->stop_time, name + " stop_time");
      std::string r = RankRecordToJson(*rr);
      while (!r.empty() && r.back() == '\n') r.pop_back();
      ranks.push_back(r);
      ExitStatus es{rr->exit_code, rr->signal};
      if (rr->status == "exited" && !es.ok() && !have_cause[rr->rank])
        e.causes.push_back({rr->rank, es.ToString()});
    } else if (name.ends_with(".log") || name.starts_with("command-node-")) {
      // Logs are appended while the attempt runs: the newest write is about when it ended.
      widen(ModifiedAt(p), name + " modified");
    } else if (name == "fr") {
      for (const auto& dump : ListNames(o_.files, p))
        widen(ModifiedAt(p + "/" + dump), "fr/" + dump + " modified");
    }
  }
  std::sort(e.causes.begin(), e.causes.end(),
            [](const RankCause& a, const RankCause& b) { return a.rank < b.rank; });
  const int world = run_.world();
  e.gpu_hours = world * std::max(0.0, e.end - e.start) / 3600;
  // Lost: what ran after the newest checkpoint saved during it (all of it when none was).
  double saved_at = e.start;
  for (const auto& c : checkpoints) {
    if (c.ok && !c.temp && c.mtime > e.start && c.mtime <= e.end)
      saved_at = std::max(saved_at, c.mtime);
  }
  e.gpu_hours_lost = world * std::max(0.0, e.end - saved_at) / 3600;
  std::string o = fmt::format(
      "{{\"attempt\": {}, \"start\": {:.3f}, \"end\": {:.3f}, \"seconds\": {:.1f}, \"outcome\": "
      "\"interrupted\", "
      "\"gpu_hours\": {:.4f}, \"gpu_hours_lost\": {:.4f}, \"flight_recorder\": {{\"verdict\": "
      "\"\", \"conclusive\": false}}, "
      "\"decision\": {{\"attempt\": {}, \"action\": \"none\", \"reason\": \"its launcher died "
      "before judging it\"}}, "
      "\"note\": {}, \"causes\": {}, \"ranks\": [{}]}}",
      attempt, e.start, e.end, e.end - e.start, e.gpu_hours, e.gpu_hours_lost, attempt,
      JsonString(
          e.end > 0
              ? fmt::format(
                    "no attempt.json: the launcher running it died; start from {}, end from {} "
                    "(the newest of its records)",
                    first_from, last_from)
              : std::string("no attempt.json and no record with a time: counted as 0 s")),
      CausesToJson(e.causes), fmt::join(ranks, ", "));
  e.json = Flagged(o, true, true);
  return e;
}

}  // namespace ek::launch::detail
