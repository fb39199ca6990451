// Env: the one seam between evenkeel and the machine it runs on, modelled on
// leveldb's Env (and RocksDB's split of it into a file system and a clock).
// Every write to the file system (create, append, fsync, rename, remove,
// mkdir, directory fsync) goes through an Env, so that a test can swap in
// FaultInjectionEnv (core/fault_env.h) and see what each writer does when the
// disk fills, a write comes up short, fsync reports EIO or a rename fails. So
// do the reads a component makes of state it shares with other processes
// (a whole-file read, a directory listing, a stat, the free space), the
// process's surroundings (environment variables, the host name) and time
// (clock(): wall and monotonic time and sleeping, core/clock.h), so that a
// test fakes the environment and runs timeouts on a FakeClock
// (core/fake_clock.h) instead of sleeping. The bulk readers of inputs
// (MappedFile, the JSONL reader) stay plain functions in core/file.h.
//
// Errors are kIoError and name the path and the operation, then strerror:
//   "out/.rank-00003.i32.tmp.41.0: write at byte 1048576: No space left on device"
//   "ckpt/.step-00000010.tmp-7: rename to ckpt/step-00000010: Input/output error"
//
// Thread safety: Env::Default() and its methods may be called from any
// thread; a WritableFile is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace ek {

// A file open for writing. Closed by Close() or, without reporting, by the
// destructor.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Writes all of `data`, retrying EINTR and short writes. On failure some
  // prefix of `data` may be in the file; the error gives the byte offset.
  virtual Status Append(std::string_view data) = 0;
  // fsync(2): data and size reach the device.
  virtual Status Sync() = 0;
  // close(2), which can report a deferred write error. A second Close is OK.
  virtual Status Close() = 0;
  virtual const std::string& path() const = 0;
  // Bytes appended through this object.
  virtual uint64_t size() const = 0;
};

// What Env::Stat (or LinkStat) learns about a path.
struct FileInfo {
  // kSymlink from LinkStat only; kOther: a device, a pipe, a socket.
  enum class Kind { kFile, kDirectory, kSymlink, kOther };
  Kind kind = Kind::kOther;
  uint64_t size = 0;
  double mtime = 0;  // seconds since the Unix epoch, with the file system's resolution
  bool is_file() const { return kind == Kind::kFile; }
  bool is_directory() const { return kind == Kind::kDirectory; }
};

class Env {
 public:
  virtual ~Env() = default;
  // The POSIX file system. Never null; lives for the whole program.
  static Env* Default();

  // Creates `path` (mode 0644), truncating an existing file.
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Opens `path` for appending (O_APPEND), creating it when missing.
  virtual Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) = 0;
  // rename(2): atomically replaces a file at `to`, or an empty directory.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // unlink(2). A missing file is kNotFound.
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes `path` and everything under it (rm -rf). A missing path is OK.
  virtual Status RemoveTree(const std::string& path) = 0;
  // Creates `path` and its parents (mkdir -p). An existing directory is OK.
  virtual Status CreateDirs(const std::string& path) = 0;
  // fsync(2) on a directory: the names created or renamed in it are durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // fsync(2) on an existing file that another process wrote (a trainer's
  // checkpoint shard), opened read-only for the purpose.
  virtual Status SyncFile(const std::string& path) = 0;

  // ---- reads ----
  // The whole file. Errors as core/file.h's ReadFile: a missing file is
  // kNotFound, a directory "PATH: is a directory, expected a file".
  virtual Result<std::string> ReadFile(const std::string& path) = 0;
  // The names in `dir` (not "." and ".."), sorted bytewise, so that every
  // caller sees one order whatever the file system's. Errors are
  // OpenDirError's (core/file.h): "DIR: no such directory" (kNotFound),
  // "DIR: is a file, expected a directory" (kInvalidArgument).
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  // stat(2). A path that does not exist is kNotFound "PATH: No such file or
  // directory"; other failures "PATH: stat: strerror".
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
  // lstat(2): as Stat, but a symbolic link is itself (kSymlink), not its target.
  virtual Result<FileInfo> LinkStat(const std::string& path) = 0;
  // Bytes free to an unprivileged writer on the file system holding `path`
  // (statvfs: f_bavail x f_frsize). Failure: "PATH: statvfs: strerror".
  virtual Result<double> FreeBytes(const std::string& path) = 0;
  // Whether `path` exists (Stat succeeds).
  bool Exists(const std::string& path) { return Stat(path).ok(); }

  // ---- the process's surroundings ----
  // getenv(3); nullopt when unset.
  virtual std::optional<std::string> GetVar(const std::string& name) = 0;
  // gethostname(2); "" when it fails.
  virtual std::string HostName() = 0;
  // Time and sleeping. Never null; lives as long as the Env.
  virtual Clock* clock() = 0;
};

// An Env that passes every call to another: the base for an Env that changes
// a few of them (FaultInjectionEnv, a test's fake environment variables).
class EnvWrapper : public Env {
 public:
  // `target` must outlive this Env.
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return target_->NewAppendableFile(path);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return target_->RenameFile(from, to);
  }
  Status RemoveFile(const std::string& path) override { return target_->RemoveFile(path); }
  Status RemoveTree(const std::string& path) override { return target_->RemoveTree(path); }
  Status CreateDirs(const std::string& path) override { return target_->CreateDirs(path); }
  Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  Status SyncFile(const std::string& path) override { return target_->SyncFile(path); }
  Result<std::string> ReadFile(const std::string& path) override { return target_->ReadFile(path); }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return target_->ListDir(dir);
  }
  Result<FileInfo> Stat(const std::string& path) override { return target_->Stat(path); }
  Result<FileInfo> LinkStat(const std::string& path) override { return target_->LinkStat(path); }
  Result<double> FreeBytes(const std::string& path) override { return target_->FreeBytes(path); }
  std::optional<std::string> GetVar(const std::string& name) override {
    return target_->GetVar(name);
  }
  std::string HostName() override { return target_->HostName(); }
  Clock* clock() override { return target_->clock(); }

 private:
  Env* target_;
};

}  // namespace ek
