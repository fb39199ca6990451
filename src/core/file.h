// File helpers: read-only mappings, whole-file reads, and atomic writes
// (temp file in the same directory, fsync, rename, fsync the directory), so a
// crash or a full disk never leaves a file that looks complete. Writes go
// through an Env (core/env.h), the seam tests use to inject faults.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/status.h"

struct stat;

namespace ek {

// A read-only memory mapping of a whole file. Movable, not copyable; the view
// returned by data() lives as long as the MappedFile. Empty files map to an
// empty view. Thread-safe for concurrent reads.
class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);
  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view data() const { return {static_cast<const char*>(addr_), size_}; }
  size_t size() const { return size_; }
  // The bytes that may be read from data(): the mapping's whole pages, where those past
  // the end of the file read as zeros (a parser's padding can lie there).
  size_t readable() const;
  const std::string& path() const { return path_; }

 private:
  void Reset();
  void* addr_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

Result<std::string> ReadFile(const std::string& path);

// Inputs are bad input when they cannot be opened or are the wrong kind of
// thing (HACKING.md, "Exit codes and errors": exit 65); only a failure of the
// disk itself while reading is an I/O error (74). These are the one place
// that decides which, for files and for directories.

// The Status for open(path, O_RDONLY) (or a read) failing with `err`: NotFound
// for a path that does not exist (ENOENT, ENOTDIR: a parent is a file),
// InvalidArgument for one that may not be read or is a directory (EISDIR:
// "path: is a directory, expected a file"), IoError otherwise. The message is
// "path: strerror(err)" unless said.
Status OpenForReadError(const std::string& path, int err);

// Opens `path` read-only (O_CLOEXEC) and returns the descriptor, which the
// caller closes; fills `*st` when given. A directory is refused with
// "path: is a directory, expected a file" (InvalidArgument); other errors are
// OpenForReadError's. Pipes and devices are accepted.
Result<int> OpenFileForRead(const std::string& path, struct stat* st = nullptr);

// The Status for opendir(path) (or a stat of a directory) failing with `err`:
// NotFound "path: no such directory" (ENOENT, or ENOTDIR for a parent that is
// a file), InvalidArgument "path: is a file, expected a directory" when path
// itself is not a directory, or "path: strerror" for EACCES and the like;
// IoError otherwise.
Status OpenDirError(const std::string& path, int err);

// Ok when `path` is a directory; otherwise OpenDirError's Status.
Status CheckDirectory(const std::string& path);

// Writes `path` atomically through `env` (core/env.h). Until Commit()
// succeeds the data lives in a hidden temp file beside the target
// ("DIR/.NAME.tmp.PID.N"); the destructor removes an uncommitted temp file, so
// a failed write leaves the target as it was (the old file, or none). Errors
// name the target and then the temp file and the operation. Not thread-safe.
class AtomicFile {
 public:
  // `env` must outlive the AtomicFile.
  static Result<AtomicFile> Create(const std::string& path, Env* env = Env::Default());
  AtomicFile() = default;
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  Status Write(std::string_view data);
  // fsync the data and close: the first half of Commit, for callers that
  // publish several files together and must know all are durable before any
  // old one goes. Commit after Sync only renames. Writes after Sync fail.
  Status Sync();
  // fsync the data (unless Sync did), close, rename over the target, fsync the directory. After
  // a failure before the rename the target is untouched; a failed directory
  // fsync is reported, the new file then being in place but not yet durable.
  Status Commit();
  // Removes the temp file; the target is untouched.
  void Abandon();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Env* env_ = nullptr;
  std::unique_ptr<WritableFile> file_;
  std::string path_;
  std::string temp_path_;
  uint64_t bytes_written_ = 0;
};

Status WriteFileAtomic(const std::string& path, std::string_view data, Env* env = Env::Default());

// Writes all of `data` to fd, retrying on EINTR and short writes. For
// descriptors that are not files evenkeel opened (stdout, pipes); files go
// through Env.
Status WriteAll(int fd, std::string_view data, std::string_view what);

// Creates `path` and its parents (like mkdir -p).
Status MakeDirs(const std::string& path, Env* env = Env::Default());

bool FileExists(const std::string& path);

}  // namespace ek
