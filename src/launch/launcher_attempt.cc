// One attempt: the checkpoint it resumes from (node 0 chooses, the other nodes
// follow) and running this node's ranks until they end.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/file.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/parse.h"
#include "heartbeat/heartbeat.h"
#include "launch/cause.h"
#include "launch/launcher_internal.h"
#include "launch/rank_exec.h"

namespace ek::launch::detail {

Checkpoint NewestCheckpoint(const std::string& ckpt_dir, ckpt::VerifyLevel level,
                            std::vector<std::string>* warnings) {
  Checkpoint c;
  auto found = ckpt::NewestVerified(ckpt_dir, level, warnings);
  if (!found.ok() || !*found) return c;
  c.step = (*found)->step;
  c.path = (*found)->path;
  c.mtime = (*found)->mtime;
  if (auto m = ckpt::ReadCheckpointManifest(c.path); m.ok()) {
    c.final = m->final;
    c.tokens = m->tokens_seen;
  }
  return c;
}

// The checkpoint an attempt resumes from: the newest that verifies with checksums
// at the run's resume level, by ckpt::NewestResumable at kFull, which is what the
// trainer's newest_resumable(full=True) runs. The launcher hands it to the trainer
// (EVENKEEL_RESUME_FROM), which resumes from exactly it, so what the launcher
// prints is what happens. An error (the checkpoint folder cannot be read) is
// returned: guessing "the start" would throw the run's progress away.
Result<Checkpoint> ResumePoint(const std::string& ckpt_dir, ckpt::ResumeLevel wanted) {
  Checkpoint c;
  auto found = ckpt::NewestResumable(ckpt_dir, ckpt::VerifyLevel::kFull, wanted, &c.skipped);
  if (!found.ok())
    return found.status().WithContext("launch: cannot choose the checkpoint to resume from");
  if (!*found) return c;
  c.step = (*found)->entry.step;
  c.path = (*found)->entry.path;
  c.mtime = (*found)->entry.mtime;
  c.level = std::string(ckpt::ResumeLevelName((*found)->level));
  auto m = ckpt::ReadCheckpointManifest(c.path);
  if (!m.ok()) return m.status().WithContext("launch: cannot choose the checkpoint to resume from");
  c.final = m->final;
  c.tokens = m->tokens_seen;
  // The manifest lists every file's size and hash; its digest names what was verified.
  uint64_t size = 0;
  auto digest = HashFile(c.path + "/evenkeel-checkpoint.json", &size);
  if (!digest.ok())
    return digest.status().WithContext("launch: cannot choose the checkpoint to resume from");
  c.manifest_xxh3 = fmt::format("{:016x}", *digest);
  return c;
}

// "checkpoint step 10 (step-00000020: skipped: checksum mismatch ...)", "the start".
std::string DescribeResume(const Checkpoint& c) {
  std::string s = c.step >= 0 ? fmt::format("checkpoint step {}", c.step) : "the start";
  if (!c.skipped.empty()) s += fmt::format(" ({})", fmt::join(c.skipped, "; "));
  if (c.level == "full") s += ", full state";
  if (c.level == "weights") s += ", weights only";
  return s;
}

Result<ResumeChoice> Launcher::ChooseResume(int attempt, Checkpoint* before) {
  if (!resume_) {
    EK_ASSIGN_OR_RETURN(Checkpoint pick, ResumePoint(paths_.ckpt_dir, WantedResume()));
    resume_ = pick;
  }
  *before = *resume_;
  resume_.reset();
  ResumeChoice c;
  if (std::find(o_.extra_args.begin(), o_.extra_args.end(), "--no-resume") != o_.extra_args.end()) {
    c.where = "from the start, as --no-resume asks";
  } else if (before->step >= 0) {
    c = {before->path, before->step, before->manifest_xxh3,
         "resuming from " + DescribeResume(*before), before->level};
  } else {
    c.where = "from " + DescribeResume(*before);
  }
  // Written before torchrun starts, so a node whose ranks join the rendezvous has read it.
  const std::string dir = paths_.Attempt(attempt);
  if (Status st = MakeDirs(dir, o_.files); !st.ok()) {
    return Status(StatusCode::kIoError, st.WithContext("launch: cannot make " + dir).message());
  }
  if (Status st = WriteRecord(dir + "/resume.json", ResumeChoiceToJson(attempt, c)); !st.ok()) {
    return Status(StatusCode::kIoError, st.message());
  }
  return c;
}

bool Launcher::FollowResume(int attempt, ResumeChoice* choice, int* exit_code) {
  const std::string p = paths_.Attempt(attempt) + "/resume.json";
  // Node 0 verifies the checkpoint with checksums before it writes this: minutes for a big one.
  const double timeout = 600 + run_.stop_grace_s;
  std::optional<Status> bad;
  bool got = WaitFor(o_.files->clock(), timeout, [&] {
    auto text = ReadIfExists(p);
    if (text.ok() && !*text) return false;  // not written yet
    auto read =
        text.ok() ? ResumeChoiceFromJson(**text, p, attempt) : Result<ResumeChoice>(text.status());
    if (read.ok()) {
      *choice = *read;
    } else {
      bad = read.status();
    }
    return true;
  });
  if (bad) {
    // Node 0's choice cannot be followed, and no other may be made here: stop, as for any bad
    // input.
    say_("launch: unreadable resume decision: " + bad->message());
    *exit_code = kExitBadInput;
    return false;
  }
  if (!got) {
    say_(
        fmt::format("launch: node 0 handed no checkpoint for attempt {} within {:.0f} s ({}): "
                    "nothing was started",
                    attempt, timeout, p));
    *exit_code = StopSignalReceived() ? kExitCancelled : kExitError;
    return false;
  }
  return true;
}

Result<NodeRecord> Launcher::RunAttempt(int attempt, const ResumeChoice& resume) {
  NodeRecord rec;
  rec.node = cluster_.node_rank;
  rec.host = o_.files->HostName();
  const std::string dir = paths_.Attempt(attempt);
  // The ranks' records and dumps go here: no attempt without it.
  if (Status st = MakeDirs(dir + "/fr", o_.files); !st.ok())
    return st.WithContext("launch: cannot make " + dir + "/fr");
  std::vector<std::string> argv = {torchrun_, "--nnodes", std::to_string(run_.nodes),
                                   "--nproc-per-node", std::to_string(run_.gpus_per_node)};
  if (cluster_.standalone) {
    argv.push_back("--standalone");
  } else {
    argv.insert(argv.end(), {"--rdzv-backend", "c10d", "--rdzv-endpoint", cluster_.rdzv_endpoint,
                             "--rdzv-id", fmt::format("{}-{}", cluster_.run_id, attempt)});
  }
  // torchrun's own default poll (0.1 s): at 1 s, every attempt's end waited up to a
  // second for torchrun to notice its ranks had exited.
  argv.insert(argv.end(), {"--max-restarts", "0", "--monitor-interval", "0.1", "--no-python",
                           o_.evenkeel_exe, "launch-rank", "--attempt-dir", dir, "--node-rank",
                           std::to_string(cluster_.node_rank), "--nproc-per-node",
                           std::to_string(run_.gpus_per_node), "--"});
  argv.insert(argv.end(), trainer_.begin(), trainer_.end());
  argv.push_back(run_.path);
  argv.insert(argv.end(), o_.extra_args.begin(), o_.extra_args.end());
  SpawnOptions so;
  so.argv = argv;
  so.env = RankEnv(attempt);
  so.env.push_back({"EVENKEEL_RESUME_FROM", resume.resume_from});
  if (!resume.manifest_xxh3.empty())
    so.env.push_back({"EVENKEEL_RESUME_MANIFEST_XXH3", resume.manifest_xxh3});
  // What the trainer restores from it: "full" (weights and the training state) or
  // "weights" (node 0's NewestResumable found no verified state, or the run asks so).
  if (!resume.resume_level.empty())
    so.env.push_back({"EVENKEEL_RESUME_LEVEL", resume.resume_level});
  so.output_pipe = true;
  so.parent_death_signal = SIGKILL;
  const std::string log_path = fmt::format("{}/torchrun-node-{}.log", dir, cluster_.node_rank);
  // A log that cannot be opened is not worth failing the attempt for.
  std::unique_ptr<WritableFile> log;
  if (auto opened = o_.files->NewAppendableFile(log_path); opened.ok()) {
    log = std::move(opened).value();
  } else {
    say_("launch: warning: torchrun's output is not logged: " + opened.status().message());
  }
  EK_RETURN_IF_ERROR(WriteRecord(dir + fmt::format("/command-node-{}.txt", cluster_.node_rank),
                                 fmt::format("{}\n", fmt::join(argv, " "))));
  rec.start = Now();
  auto child = Child::Spawn(so);
  if (!child.ok()) {
    rec.end = Now();
    rec.error = child.status().message();
    say_("launch: cannot start torchrun: " + rec.error);
    return rec;
  }
  std::string pending;
  char buf[65536];
  bool pipe_open = true;
  auto flush_lines = [&](bool all) {
    TakeCompleteLines(&pending, [&](const TextLine& line) {
      if (line.text.starts_with("[rank ") || line.text.starts_with("[evenfix]"))
        say_(std::string(line.text));
    });
    if (all && !pending.empty()) {
      if (pending.starts_with("[rank ")) say_(pending);
      pending.clear();
    }
  };
  std::optional<ExitStatus> st;
  while (!st) {
    if (cluster_.node_rank == 0) TrackBeats(attempt, rec.start, false);
    if (int sig = StopSignalReceived()) {
      say_(fmt::format(
          "launch: {} received: stopping the ranks (grace {:.0f} s)",
          sigabbrev_np(sig) ? std::string("SIG") + sigabbrev_np(sig) : std::string("a signal"),
          run_.stop_grace_s));
      rec.cancelled = true;
      st = child->Stop(run_.stop_grace_s);
      break;
    }
    if (pipe_open) {
      struct pollfd p = {child->output_fd(), POLLIN, 0};
      if (::poll(&p, 1, 200) > 0) {
        ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
        if (got > 0) {
          if (log) (void)log->Append(std::string_view(buf, static_cast<size_t>(got)));
          pending.append(buf, static_cast<size_t>(got));
          flush_lines(false);
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          pipe_open = false;
        }
      }
    } else {
      SleepInterruptible(0.2);
    }
    st = child->Poll();
  }
  // Whatever is left in the pipe.
  while (pipe_open) {
    ssize_t got = ::read(child->output_fd(), buf, sizeof buf);
    if (got <= 0) break;
    if (log) (void)log->Append(std::string_view(buf, static_cast<size_t>(got)));
    pending.append(buf, static_cast<size_t>(got));
  }
  flush_lines(true);
  if (log) (void)log->Close();
  rec.end = Now();
  if (cluster_.node_rank == 0) TrackBeats(attempt, rec.start, true);
  rec.torchrun_code = st->code;
  rec.torchrun_signal = st->signal;
  const int first_rank = cluster_.node_rank * run_.gpus_per_node,
            end_rank = first_rank + run_.gpus_per_node;
  // A wrapper torchrun left behind (torchrun killed, or gone first) stops its trainer within
  // kStopGraceS and then writes its end: wait for it (even after a stop signal) before inferring
  // one.
  const double wait_until = Now() + kStopGraceS + 5;
  while (Now() < wait_until) {
    bool pending = false;
    for (int r = first_rank; r < end_rank && !pending; ++r) {
      std::string p = fmt::format("{}/rank-{}.json", dir, r);
      auto text = ReadIfExists(p);
      if (!text.ok() || !*text) continue;
      auto rr = RankRecordFromJson(**text, p);
      pending = rr.ok() && rr->status != "exited" && ProcessAlive(rr->pid);
    }
    if (!pending) break;
    ::usleep(200000);
  }
  // This attempt's heartbeats (an older beat is an earlier attempt's): how far each rank got, and
  // when.
  std::vector<std::string> problems;
  std::map<int, heartbeat::Heartbeat> beats;
  for (const auto& hb : heartbeat::ReadHeartbeatDir(paths_.heartbeat, &problems)) {
    rec.step_reached = std::max<int64_t>(rec.step_reached, hb.step);
    if (hb.rank >= first_rank && hb.rank < end_rank && hb.time >= rec.start - 1)
      beats[hb.rank] = hb;
  }
  for (const auto& [r, hb] : beats)
    rec.progress.push_back({r, hb.step, hb.phase, hb.phase_step, hb.time, hb.pid});
  for (int r = first_rank; r < end_rank; ++r) {
    std::string p = fmt::format("{}/rank-{}.json", dir, r);
    auto text = ReadIfExists(p);
    const std::string log = fmt::format("{}/rank-{}.log", dir, r);
    if (text.ok() && !*text) {
      // No record at all: the rank never started, unless it left a log or a beat.
      if (!beats.count(r) && !FileExists(log)) continue;
      RankRecord x;
      x.rank = r;
      x.local_rank = r - first_rank;
      x.node_rank = cluster_.node_rank;
      x.host = rec.host;
      x.pid = beats.count(r) ? beats[r].pid : 0;
      x.start = rec.start;
      x.log = log;
      x.status = "missing";
      x.note =
          "its wrapper left no record; start and end are torchrun's, the trainer is taken as "
          "killed with its wrapper";
      text = std::optional<std::string>(RankRecordToJson(x));
    }
    auto rr = text.ok() ? RankRecordFromJson(**text, p) : Result<RankRecord>(text.status());
    if (!rr.ok()) {
      say_("launch: warning: rank record left out: " + rr.status().message());
      continue;
    }
    if (rr->status != "exited") {
      // The wrapper was killed before its trainer ended: torchrun SIGKILLs the wrapper's
      // process group (the trainer is in it) 30 s after its SIGTERM, and a trainer outlives
      // a killed wrapper by no more than its parent-death signal, SIGKILL.
      if (rr->status != "missing") {
        rr->note = fmt::format(
            "its wrapper was killed while its record said \"{}\"{}: the trainer died with it "
            "(SIGKILL); the end is torchrun's",
            rr->status,
            rr->stop_signal
                ? fmt::format(" (stop signal {} at {:.3f})", rr->stop_signal, rr->stop_time)
                : "");
      }
      rr->inferred = true;
      rr->exit_code = -1;
      rr->signal = SIGKILL;
      rr->end = rec.end;
      // The rank's own record says so too, marked as the launcher's inference.
      EK_RETURN_IF_ERROR(WriteRecord(p, RankRecordToJson(*rr)));
    }
    rec.ranks.push_back(*rr);
  }
  // Why each failed rank failed: its log's first error, else its exit status or signal.
  for (const auto& rr : rec.ranks) {
    ExitStatus es{rr.exit_code, rr.signal};
    if (es.ok()) continue;
    std::string cause;
    if (auto log = ReadIfExists(rr.log); log.ok() && *log) cause = FirstError(**log, rr.rank);
    if (cause.empty())
      cause = es.ToString() + (rr.inferred ? " (inferred: its wrapper was killed first)" : "");
    rec.causes.push_back({rr.rank, cause});
  }
  return rec;
}

}  // namespace ek::launch::detail
