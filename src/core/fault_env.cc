#include "core/fault_env.h"

#include <fmt/core.h>

#include <algorithm>

#include "core/file.h"

namespace ek {

std::string_view FileOpName(FileOp op) {
  switch (op) {
    case FileOp::kOpen:
      return "open";
    case FileOp::kAppend:
      return "write";
    case FileOp::kSync:
      return "fsync";
    case FileOp::kClose:
      return "close";
    case FileOp::kRename:
      return "rename";
    case FileOp::kRemove:
      return "remove";
    case FileOp::kRemoveTree:
      return "remove tree";
    case FileOp::kCreateDirs:
      return "create directory";
    case FileOp::kSyncDir:
      return "fsync directory";
    case FileOp::kSyncFile:
      return "fsync file";
    case FileOp::kRead:
      return "read";
    case FileOp::kList:
      return "list";
    case FileOp::kStat:
      return "stat";
  }
  return "?";
}

FaultRule FaultRule::Fail(FileOp op, std::string path_contains, int err) {
  FaultRule r;
  r.op = op;
  r.path_contains = std::move(path_contains);
  r.err = err;
  return r;
}

FaultRule FaultRule::ShortWrite(std::string path_contains, int64_t bytes, int err) {
  FaultRule r = Fail(FileOp::kAppend, std::move(path_contains), err);
  r.short_bytes = bytes;
  return r;
}

FaultRule FaultRule::Nth(int n) const {
  FaultRule r = *this;
  r.nth = n;
  return r;
}

FaultRule FaultRule::Times(int n) const {
  FaultRule r = *this;
  r.times = n;
  return r;
}

void FaultInjectionEnv::Add(FaultRule rule) {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.push_back({std::move(rule), 0});
}

void FaultInjectionEnv::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  rules_.clear();
}

int FaultInjectionEnv::injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return injected_;
}

int FaultInjectionEnv::calls(FileOp op) const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_[static_cast<int>(op)];
}

bool FaultInjectionEnv::Fires(FileOp op, const std::string& path, const std::string& other,
                              FaultRule* fired) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_[static_cast<int>(op)];
  for (Slot& s : rules_) {
    const FaultRule& r = s.rule;
    if (r.op != op) continue;
    bool match = r.path_contains.empty() || path.find(r.path_contains) != std::string::npos ||
                 (!other.empty() && other.find(r.path_contains) != std::string::npos);
    if (!match) continue;
    int n = ++s.matched;
    if (n < r.nth || (r.times >= 0 && n >= r.nth + r.times)) continue;
    ++injected_;
    *fired = r;
    return true;
  }
  return false;
}

namespace {

// Passes calls to the base Env's file, failing those a rule matches.
class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionEnv* env, std::unique_ptr<WritableFile> base)
      : env_(env), base_(std::move(base)) {}

  Status Append(std::string_view data) override {
    FaultRule r;
    // An empty write never reaches the disk, so it cannot fail.
    if (data.empty() || !env_->Fires(FileOp::kAppend, path(), "", &r)) return base_->Append(data);
    if (r.short_bytes > 0) {
      size_t n = std::min(data.size(), static_cast<size_t>(r.short_bytes));
      EK_RETURN_IF_ERROR(base_->Append(data.substr(0, n)));
    }
    // (For a file opened to append, the byte counts from the open.)
    return ErrnoError(fmt::format("{}: write at byte {}", path(), base_->size()), r.err);
  }
  Status Sync() override {
    FaultRule r;
    if (env_->Fires(FileOp::kSync, path(), "", &r)) return ErrnoError(path() + ": fsync", r.err);
    return base_->Sync();
  }
  Status Close() override {
    FaultRule r;
    if (env_->Fires(FileOp::kClose, path(), "", &r)) {
      (void)base_->Close();  // the descriptor is gone all the same, as with close(2)
      return ErrnoError(path() + ": close", r.err);
    }
    return base_->Close();
  }
  const std::string& path() const override { return base_->path(); }
  uint64_t size() const override { return base_->size(); }

 private:
  FaultInjectionEnv* env_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewWritableFile(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kOpen, path, "", &r)) return ErrnoError(path + ": open for writing", r.err);
  EK_ASSIGN_OR_RETURN(auto f, base_->NewWritableFile(path));
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, std::move(f)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectionEnv::NewAppendableFile(
    const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kOpen, path, "", &r)) return ErrnoError(path + ": open for writing", r.err);
  EK_ASSIGN_OR_RETURN(auto f, base_->NewAppendableFile(path));
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, std::move(f)));
}

Status FaultInjectionEnv::RenameFile(const std::string& from, const std::string& to) {
  FaultRule r;
  if (Fires(FileOp::kRename, from, to, &r)) {
    return ErrnoError(fmt::format("{}: rename to {}", from, to), r.err);
  }
  return base_->RenameFile(from, to);
}

Status FaultInjectionEnv::RemoveFile(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kRemove, path, "", &r)) return ErrnoError(path + ": remove", r.err);
  return base_->RemoveFile(path);
}

Status FaultInjectionEnv::RemoveTree(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kRemoveTree, path, "", &r)) return ErrnoError(path + ": remove", r.err);
  return base_->RemoveTree(path);
}

Status FaultInjectionEnv::CreateDirs(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kCreateDirs, path, "", &r)) {
    return ErrnoError(path + ": create directory", r.err);
  }
  return base_->CreateDirs(path);
}

Status FaultInjectionEnv::SyncDir(const std::string& dir) {
  FaultRule r;
  if (Fires(FileOp::kSyncDir, dir, "", &r)) return ErrnoError(dir + ": fsync", r.err);
  return base_->SyncDir(dir);
}

Status FaultInjectionEnv::SyncFile(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kSyncFile, path, "", &r)) return ErrnoError(path + ": fsync", r.err);
  return base_->SyncFile(path);
}

Result<std::string> FaultInjectionEnv::ReadFile(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kRead, path, "", &r)) return ErrnoError(path, r.err);
  return base_->ReadFile(path);
}

Result<std::vector<std::string>> FaultInjectionEnv::ListDir(const std::string& dir) {
  FaultRule r;
  if (Fires(FileOp::kList, dir, "", &r)) return OpenDirError(dir, r.err);
  return base_->ListDir(dir);
}

namespace {

Status StatFault(const std::string& path, int err) {
  if (err == ENOENT) return NotFoundError(ErrnoError(path, err).message());
  return ErrnoError(path + ": stat", err);
}

}  // namespace

Result<FileInfo> FaultInjectionEnv::Stat(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kStat, path, "", &r)) return StatFault(path, r.err);
  return base_->Stat(path);
}

Result<FileInfo> FaultInjectionEnv::LinkStat(const std::string& path) {
  FaultRule r;
  if (Fires(FileOp::kStat, path, "", &r)) return StatFault(path, r.err);
  return base_->LinkStat(path);
}

void FaultInjectionEnv::SetVar(const std::string& name, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!vars_) vars_.emplace();
  (*vars_)[name] = value;
}

void FaultInjectionEnv::SetVars(std::map<std::string, std::string> vars) {
  std::lock_guard<std::mutex> lock(mu_);
  vars_ = std::move(vars);
}

void FaultInjectionEnv::SetHostName(std::string host) {
  std::lock_guard<std::mutex> lock(mu_);
  host_ = std::move(host);
}

void FaultInjectionEnv::SetFreeBytes(std::optional<double> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  free_bytes_ = bytes;
}

void FaultInjectionEnv::SetClock(Clock* clock) {
  std::lock_guard<std::mutex> lock(mu_);
  clock_ = clock;
}

Result<double> FaultInjectionEnv::FreeBytes(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_bytes_) {
      if (*free_bytes_) return **free_bytes_;
      return UnavailableError(path + ": statvfs: no answer");
    }
  }
  return base_->FreeBytes(path);
}

std::optional<std::string> FaultInjectionEnv::GetVar(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (vars_) {
      auto it = vars_->find(name);
      if (it == vars_->end()) return std::nullopt;
      return it->second;
    }
  }
  return base_->GetVar(name);
}

std::string FaultInjectionEnv::HostName() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (host_) return *host_;
  }
  return base_->HostName();
}

Clock* FaultInjectionEnv::clock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (clock_ != nullptr) return clock_;
  }
  return base_->clock();
}

std::vector<WriteFault> WriteFaults(const std::string& p) {
  const std::string nospc = "No space left on device", eio = "Input/output error";
  return {
      {"open_enospc", FaultRule::Fail(FileOp::kOpen, p, ENOSPC), {"open for writing", nospc}},
      {"write_enospc", FaultRule::Fail(FileOp::kAppend, p, ENOSPC), {"write at byte", nospc}},
      {"write_eio", FaultRule::Fail(FileOp::kAppend, p, EIO), {"write at byte", eio}},
      {"short_write", FaultRule::ShortWrite(p, 7), {"write at byte 7", nospc}},
      {"fsync_eio", FaultRule::Fail(FileOp::kSync, p, EIO), {"fsync", eio}},
      {"close_eio", FaultRule::Fail(FileOp::kClose, p, EIO), {"close", eio}},
      {"rename_eio", FaultRule::Fail(FileOp::kRename, p, EIO), {"rename to", eio}},
  };
}

}  // namespace ek
