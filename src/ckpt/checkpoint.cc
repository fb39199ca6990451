// FinalizeCheckpoint, ListCheckpoints, NewestVerified, PruneCheckpoints and the
// directory and hashing helpers they share with verify.cc.
#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "ckpt/internal.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/process.h"
#include "core/version.h"

namespace ek::ckpt {

std::string StepDirName(int64_t step) { return fmt::format("step-{:08d}", step); }

namespace internal {

std::string Quoted(std::string_view s) {
  if (s.size() > 80) return fmt::format("'{}...'", s.substr(0, 80));
  return fmt::format("'{}'", s);
}

std::string BaseName(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "a/b/" names b
  return p.has_filename() ? p.filename().string() : p.string();
}

std::string ParentOf(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "a/b/" is in a
  if (!p.has_relative_path()) return p.string().empty() ? "." : "/";
  std::filesystem::path parent = p.parent_path();
  return parent.empty() ? "." : parent.string();
}

Result<std::vector<DirEntry>> ListDir(const std::string& dir, Env* env) {
  EK_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));  // sorted
  std::vector<DirEntry> out;
  out.reserve(names.size());
  for (std::string& name : names) {
    auto info = env->LinkStat(dir + "/" + name);
    if (!info.ok()) continue;  // vanished meanwhile
    DirEntry entry;
    entry.name = std::move(name);
    entry.regular = info->is_file();
    entry.directory = info->is_directory();
    entry.size = entry.regular ? info->size : 0;
    entry.mtime = info->mtime;
    out.push_back(std::move(entry));
  }
  return out;
}

Status HashFileChunks(const std::string& path, uint64_t chunk_bytes, FileRecord* rec) {
  if (chunk_bytes == 0) return InvalidArgumentError(path + ": chunk size 0");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(path, errno);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  XXH3_state_t* whole = XXH3_createState();
  XXH3_state_t* chunk = XXH3_createState();
  XXH3_64bits_reset(whole);
  XXH3_64bits_reset(chunk);
  rec->size = 0;
  rec->chunks.clear();
  rec->chunk_bytes = chunk_bytes;
  // 8 MiB reads: large enough that syscalls and readahead are not the limit.
  std::string buf(std::min<uint64_t>(8ull << 20, chunk_bytes), '\0');
  uint64_t in_chunk = 0;
  Status status;
  while (true) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), chunk_bytes - in_chunk));
    ssize_t n = ::read(fd, buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = ErrnoError(fmt::format("{}: read at byte {}", path, rec->size), errno);
      break;
    }
    if (n == 0) break;
    XXH3_64bits_update(whole, buf.data(), static_cast<size_t>(n));
    XXH3_64bits_update(chunk, buf.data(), static_cast<size_t>(n));
    rec->size += static_cast<uint64_t>(n);
    in_chunk += static_cast<uint64_t>(n);
    if (in_chunk == chunk_bytes) {
      rec->chunks.push_back(XXH3_64bits_digest(chunk));
      XXH3_64bits_reset(chunk);
      in_chunk = 0;
    }
  }
  if (status.ok()) {
    if (in_chunk > 0) rec->chunks.push_back(XXH3_64bits_digest(chunk));
    rec->xxh3 = XXH3_64bits_digest(whole);
  }
  XXH3_freeState(whole);
  XXH3_freeState(chunk);
  ::close(fd);
  return status;
}

std::optional<int64_t> StepOfFinalName(std::string_view name) {
  if (!name.starts_with("step-")) return std::nullopt;
  std::string_view digits = name.substr(5);
  if (digits.size() < 8 || digits.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<TempName> ParseTempName(std::string_view name) {
  // .step-NNNNNNNN.KIND-PID
  if (!name.starts_with(".step-")) return std::nullopt;
  std::string_view rest = name.substr(6);
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto step = StepOfFinalName(fmt::format("step-{}", rest.substr(0, dot)));
  if (!step) return std::nullopt;
  rest = rest.substr(dot + 1);
  TempName t;
  t.step = *step;
  if (rest.starts_with("tmp-")) {
    t.kind = TempName::kWriting;
  } else if (rest.starts_with("old-")) {
    t.kind = TempName::kReplaced;
  } else if (rest.starts_with("del-")) {
    t.kind = TempName::kRemoving;
  } else {
    return std::nullopt;
  }
  rest = rest.substr(4);
  if (rest.empty() || rest.size() > 9) return std::nullopt;
  for (char c : rest) {
    if (c < '0' || c > '9') return std::nullopt;
    t.pid = t.pid * 10 + (c - '0');
  }
  return t;
}

}  // namespace internal

using namespace internal;

namespace {

// Hashes `names` inside `dir` on a few threads, then fsyncs each through
// `env` (the page cache has it; the trainer did not fsync); records come back
// in order.
Status HashAndSyncFiles(Env* env, const std::string& dir, const std::vector<std::string>& names,
                        std::vector<FileRecord>* out) {
  out->assign(names.size(), FileRecord{});
  std::vector<Status> status(names.size());
  RunParallel(names.size(), 0, [&](size_t i) {
    (*out)[i].name = names[i];
    const std::string path = dir + "/" + names[i];
    status[i] = HashFileChunks(path, kChunkBytes, &(*out)[i]);
    if (status[i].ok()) status[i] = env->SyncFile(path);
  });
  for (const auto& s : status) EK_RETURN_IF_ERROR(s);
  return Status::Ok();
}

}  // namespace

Status FinalizeCheckpoint(const std::string& temp_dir, const std::string& final_dir,
                          const CheckpointManifest& meta_without_files, Env* env) {
  const std::string what = "finalize " + temp_dir;
  EK_RETURN_IF_ERROR(CheckExtraJson(meta_without_files.extra).WithContext(what));
  if (auto step = StepOfFinalName(BaseName(final_dir)); step && *step != meta_without_files.step) {
    return InvalidArgumentError(fmt::format("{}: the manifest says step {} but the target is {}",
                                            what, meta_without_files.step, final_dir));
  }
  if (BaseName(temp_dir) == BaseName(final_dir) && ParentOf(temp_dir) == ParentOf(final_dir)) {
    return InvalidArgumentError(what + ": the temp and final directories are the same");
  }
  if (SafetensorsDtypeFor(meta_without_files.dtype).empty()) {
    return InvalidArgumentError(
        fmt::format("{}: dtype '{}' (bfloat16, float16, float32)", what, meta_without_files.dtype));
  }
  {
    // What is written must read back: refuse a negative step or the like now,
    // before hashing, rather than finalize a checkpoint no reader accepts.
    CheckpointManifest probe = meta_without_files;
    probe.format_version = kCheckpointFormatVersion;
    probe.files.clear();
    auto back =
        CheckpointManifestFromJson(CheckpointManifestToJson(probe), std::string(kManifestName));
    if (!back.ok())
      return InvalidArgumentError(fmt::format("{}: {}", what, back.status().message()));
  }
  EK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(temp_dir));
  std::vector<std::string> names;
  const std::optional<TrainStateRef>& train_state = meta_without_files.train_state;
  bool state_dir_seen = false;
  for (const auto& e : entries) {
    if (e.directory) {
      // The one subdirectory: the training state the manifest's train_state names.
      if (!train_state || e.name != train_state->dir) {
        return InvalidArgumentError(fmt::format(
            "{}/{}: a subdirectory, and {}", temp_dir, e.name,
            train_state ? fmt::format("the only one a checkpoint may have is train_state.dir '{}'",
                                      train_state->dir)
                        : std::string("the manifest has no train_state (a checkpoint without "
                                      "the training state is flat)")));
      }
      state_dir_seen = true;
      const std::string sub = temp_dir + "/" + e.name;
      EK_ASSIGN_OR_RETURN(std::vector<DirEntry> inside, ListDir(sub));
      for (const auto& f : inside) {
        if (!f.regular) {
          return InvalidArgumentError(
              fmt::format("{}/{}: not a regular file ({} holds files only)", sub, f.name, e.name));
        }
        names.push_back(e.name + "/" + f.name);
      }
      continue;
    }
    if (e.name == kManifestName) continue;  // a previous attempt's; rewritten below
    if (e.name.starts_with(".evenkeel-checkpoint.json.tmp.")) {
      // WriteFileAtomic's temp file, left by an attempt that crashed.
      (void)env->RemoveFile(temp_dir + "/" + e.name);
      continue;
    }
    if (!e.regular) {
      return InvalidArgumentError(fmt::format(
          "{}/{}: not a regular file (a checkpoint directory is flat)", temp_dir, e.name));
    }
    names.push_back(e.name);
  }
  if (train_state && !state_dir_seen) {
    return InvalidArgumentError(fmt::format("{}/{}: missing (the manifest's train_state names it)",
                                            temp_dir, train_state->dir));
  }
  std::sort(names.begin(), names.end());  // "train_state/..." among the rest, as listed
  CheckpointManifest m = meta_without_files;
  m.format_version = kCheckpointFormatVersion;
  if (m.created.empty()) m.created = UtcNowIso8601();
  if (m.evenkeel_version.empty()) m.evenkeel_version = kVersion;
  EK_RETURN_IF_ERROR(HashAndSyncFiles(env, temp_dir, names, &m.files).WithContext(what));
  const std::string manifest_path = temp_dir + "/" + std::string(kManifestName);
  EK_RETURN_IF_ERROR(
      WriteFileAtomic(manifest_path, CheckpointManifestToJson(m), env).WithContext(what));
  // A directory that would fail verification never gets a final name.
  auto report = VerifyCheckpoint(temp_dir, VerifyLevel::kStructure);
  if (!report.ok() || !report->ok) {
    (void)env->RemoveFile(manifest_path);
    return report.ok() ? CorruptError(fmt::format("{}: not finalized: {}", temp_dir,
                                                  report->problems.front()))
                       : report.status().WithContext(what);
  }
  if (train_state)
    EK_RETURN_IF_ERROR(env->SyncDir(temp_dir + "/" + train_state->dir).WithContext(what));
  EK_RETURN_IF_ERROR(env->SyncDir(temp_dir).WithContext(what));

  const std::string parent = ParentOf(final_dir);
  std::string aside;
  struct stat st;
  if (::lstat(final_dir.c_str(), &st) == 0) {
    // Move the old copy out of the final name first: rename(2) cannot replace
    // a non-empty directory, and removing it in place would leave a
    // half-deleted step-NNNNNNNN behind a crash.
    aside = fmt::format("{}/.{}.old-{}", parent, BaseName(final_dir), ::getpid());
    EK_RETURN_IF_ERROR(env->RemoveTree(aside).WithContext(what));
    EK_RETURN_IF_ERROR(env->RenameFile(final_dir, aside)
                           .WithContext(what + ": move the existing checkpoint aside"));
  }
  if (Status st = env->RenameFile(temp_dir, final_dir); !st.ok()) {
    if (!aside.empty()) (void)env->RenameFile(aside, final_dir);
    return st.WithContext(what);
  }
  // From here the new checkpoint is in place and complete; a failed fsync
  // means it may not survive a power cut, which the caller must hear.
  EK_RETURN_IF_ERROR(env->SyncDir(parent).WithContext(what));
  if (ParentOf(temp_dir) != parent)
    EK_RETURN_IF_ERROR(env->SyncDir(ParentOf(temp_dir)).WithContext(what));
  // An old copy that fails to go is an abandoned hidden directory that
  // PruneCheckpoints removes later.
  if (!aside.empty()) (void)env->RemoveTree(aside);
  return Status::Ok();
}

namespace {

CheckpointEntry JudgeTemp(const std::string& ckpt_dir, const DirEntry& e, const TempName& t) {
  CheckpointEntry c;
  c.name = e.name;
  c.path = ckpt_dir + "/" + e.name;
  c.step = t.step;
  c.temp = true;
  c.mtime = e.mtime;
  if (auto inside = ListDir(c.path); inside.ok()) {
    for (const auto& f : *inside) c.bytes += f.size;
    if (auto state = ListDir(c.path + "/" + std::string(kTrainStateDir)); state.ok()) {
      for (const auto& f : *state) c.bytes += f.size;
    }
  }
  static constexpr const char* kDoing[] = {"in progress", "being replaced", "being removed"};
  c.verdict = ProcessAlive(t.pid) ? fmt::format("{} (pid {})", kDoing[t.kind], t.pid)
                                  : fmt::format("abandoned (pid {} is gone)", t.pid);
  return c;
}

// Verifies one step directory into an entry; a directory that cannot be read
// is an entry whose verdict says so.
CheckpointEntry JudgeStep(const std::string& ckpt_dir, const DirEntry& e, int64_t step,
                          VerifyLevel level) {
  CheckpointEntry c;
  c.name = e.name;
  c.path = ckpt_dir + "/" + e.name;
  c.step = step;
  c.mtime = e.mtime;
  auto report = VerifyCheckpoint(c.path, level);
  if (!report.ok()) {
    c.verdict = report.status().message();
    return c;
  }
  c.bytes = report->total_bytes;
  c.ok = report->ok;
  c.weights_ok = report->weights_ok;
  c.has_train_state = report->has_train_state;
  c.train_state_ok = report->train_state_ok;
  c.verdict = report->ok ? "ok" : report->problems.front();
  return c;
}

// Why a checkpoint whose weights verify cannot resume fully.
std::string WhyNotFull(const CheckpointEntry& c) {
  if (!c.has_train_state) return "no training state, saved before format 2 or without it";
  return c.verdict;  // the first problem: the training state's, the weights being fine
}

struct StepDir {
  const DirEntry* entry;
  int64_t step;
};

// Step directories, newest first.
std::vector<StepDir> StepDirsNewestFirst(const std::vector<DirEntry>& entries) {
  std::vector<StepDir> out;
  for (const auto& e : entries) {
    if (!e.directory) continue;
    if (auto step = StepOfFinalName(e.name)) out.push_back({&e, *step});
  }
  std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) {
    return a.step != b.step ? a.step > b.step : a.entry->name > b.entry->name;
  });
  return out;
}

}  // namespace

Result<std::vector<CheckpointEntry>> ListCheckpoints(const std::string& ckpt_dir,
                                                     VerifyLevel level) {
  EK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(ckpt_dir));
  std::vector<CheckpointEntry> out;
  for (const auto& e : entries) {
    if (!e.directory) continue;
    if (auto step = StepOfFinalName(e.name)) {
      out.push_back(JudgeStep(ckpt_dir, e, *step, level));
    } else if (auto t = ParseTempName(e.name)) {
      out.push_back(JudgeTemp(ckpt_dir, e, *t));
    }
  }
  std::sort(out.begin(), out.end(), [](const CheckpointEntry& a, const CheckpointEntry& b) {
    return a.step != b.step ? a.step < b.step : a.name < b.name;
  });
  return out;
}

Result<std::optional<CheckpointEntry>> NewestVerified(const std::string& ckpt_dir,
                                                      VerifyLevel level,
                                                      std::vector<std::string>* warnings) {
  auto entries = ListDir(ckpt_dir);
  if (!entries.ok()) {
    if (entries.status().code() == StatusCode::kNotFound) return std::optional<CheckpointEntry>();
    return entries.status();
  }
  for (const StepDir& s : StepDirsNewestFirst(*entries)) {
    CheckpointEntry c = JudgeStep(ckpt_dir, *s.entry, s.step, level);
    if (c.ok) return std::optional<CheckpointEntry>(std::move(c));
    if (warnings != nullptr) warnings->push_back(fmt::format("{}: skipped: {}", c.name, c.verdict));
  }
  return std::optional<CheckpointEntry>();
}

std::string_view ResumeLevelName(ResumeLevel level) {
  return level == ResumeLevel::kFull ? "full" : "weights";
}

std::optional<ResumeLevel> ParseResumeLevel(std::string_view name) {
  if (name == "full") return ResumeLevel::kFull;
  if (name == "weights") return ResumeLevel::kWeights;
  return std::nullopt;
}

std::string CheckpointEntry::Resume() const {
  if (temp || !weights_ok) return "-";
  return has_train_state && train_state_ok ? "full" : "weights";
}

Result<std::optional<Resumable>> NewestResumable(const std::string& ckpt_dir, VerifyLevel verify,
                                                 ResumeLevel wanted,
                                                 std::vector<std::string>* warnings) {
  auto entries = ListDir(ckpt_dir);
  if (!entries.ok()) {
    if (entries.status().code() == StatusCode::kNotFound) return std::optional<Resumable>();
    return entries.status();
  }
  auto warn = [&](std::string w) {
    if (warnings != nullptr) warnings->push_back(std::move(w));
  };
  // Each directory is verified once; the walk is newest first and stops at the
  // first full one (kFull) or the first with good weights (kWeights).
  std::optional<CheckpointEntry> weights_only;  // the newest with verified weights
  std::string why_not_full;
  std::vector<std::string> skipped;  // kFull's warnings, held until the outcome is known
  for (const StepDir& s : StepDirsNewestFirst(*entries)) {
    CheckpointEntry c = JudgeStep(ckpt_dir, *s.entry, s.step, verify);
    if (wanted == ResumeLevel::kWeights) {
      if (c.weights_ok) return std::optional<Resumable>(Resumable{std::move(c), wanted});
      warn(fmt::format("{}: skipped: {}", c.name, c.verdict));
      continue;
    }
    if (c.ok && c.has_train_state) {
      for (auto& w : skipped) warn(std::move(w));
      return std::optional<Resumable>(Resumable{std::move(c), ResumeLevel::kFull});
    }
    std::string why = c.weights_ok ? WhyNotFull(c) : c.verdict;
    if (c.weights_ok && c.has_train_state) why = "training state: " + why;
    if (c.weights_ok && !c.has_train_state) why += ": weights only";
    skipped.push_back(fmt::format("{}: skipped: {}", c.name, why));
    if (c.weights_ok && !weights_only) {
      weights_only = c;
      why_not_full =
          c.has_train_state ? "its training state does not verify: " + c.verdict : WhyNotFull(c);
    }
  }
  if (!weights_only) {
    for (auto& w : skipped) warn(std::move(w));
    return std::optional<Resumable>();
  }
  // Nothing resumes fully: the warnings are those of the checkpoints newer than
  // the one chosen, then why it gives weights only.
  for (auto& w : skipped) {
    if (w.starts_with(weights_only->name + ":")) break;
    warn(std::move(w));
  }
  warn(fmt::format("no checkpoint has a verified training state; resuming weights only from {}: {}",
                   weights_only->name, why_not_full));
  return std::optional<Resumable>(Resumable{std::move(*weights_only), ResumeLevel::kWeights});
}

namespace {

// Renames to a hidden name, then removes: a crash leaves a hidden directory
// that the next prune removes, never a half-empty step-NNNNNNNN.
Status RemoveCheckpointDir(Env* env, const std::string& ckpt_dir, const DirEntry& e, int64_t step) {
  std::string path = ckpt_dir + "/" + e.name;
  std::string hidden = fmt::format("{}/.{}.del-{}", ckpt_dir, StepDirName(step), ::getpid());
  if (e.name.starts_with(".")) return env->RemoveTree(path);
  EK_RETURN_IF_ERROR(env->RemoveTree(hidden));
  EK_RETURN_IF_ERROR(env->RenameFile(path, hidden).WithContext("remove " + path));
  return env->RemoveTree(hidden);
}

}  // namespace

Status PruneCheckpoints(const std::string& ckpt_dir, int keep, std::vector<std::string>* removed,
                        Env* env) {
  if (keep < 1)
    return InvalidArgumentError(
        fmt::format("prune {}: keep must be at least 1, not {}", ckpt_dir, keep));
  EK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(ckpt_dir));
  std::vector<StepDir> steps = StepDirsNewestFirst(entries);
  // The oldest step kept: the keep-th newest verified one, or the oldest
  // verified one when there are fewer. Directories older than it go.
  std::optional<int64_t> oldest_kept;
  int verified = 0;
  size_t i = 0;
  for (; i < steps.size() && verified < keep; ++i) {
    auto report = VerifyCheckpoint(ckpt_dir + "/" + steps[i].entry->name, VerifyLevel::kStructure);
    if (report.ok() && report->ok) {
      ++verified;
      oldest_kept = steps[i].step;
    }
  }
  if (oldest_kept) {
    for (const StepDir& s : steps) {
      if (s.step >= *oldest_kept) continue;
      EK_RETURN_IF_ERROR(RemoveCheckpointDir(env, ckpt_dir, *s.entry, s.step).WithContext("prune"));
      if (removed != nullptr) removed->push_back(s.entry->name);
    }
  }
  for (const auto& e : entries) {
    if (!e.directory) continue;
    auto t = ParseTempName(e.name);
    if (!t || ProcessAlive(t->pid)) continue;
    EK_RETURN_IF_ERROR(RemoveCheckpointDir(env, ckpt_dir, e, t->step).WithContext("prune"));
    if (removed != nullptr) removed->push_back(e.name);
  }
  return Status::Ok();
}

}  // namespace ek::ckpt
