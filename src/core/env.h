// Env: the one seam through which evenkeel writes files, modelled on
// leveldb's Env. Every write to the file system (create, append, fsync,
// rename, remove, mkdir, directory fsync) goes through an Env, so that a test
// can swap in FaultInjectionEnv (core/fault_env.h) and see what each writer
// does when the disk fills, a write comes up short, fsync reports EIO or a
// rename fails. Reads stay plain functions in core/file.h.
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
#include <string>
#include <string_view>

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
};

}  // namespace ek
