// File helpers: read-only mappings, whole-file reads, and atomic writes
// (temp file in the same directory, fsync, rename, fsync the directory), so a
// crash never leaves a file that looks complete.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

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
  const std::string& path() const { return path_; }

 private:
  void Reset();
  void* addr_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

Result<std::string> ReadFile(const std::string& path);

// The Status for open(path, O_RDONLY) failing with `err`: NotFound for a path
// that does not exist, InvalidArgument for one that may not be read (both are
// bad input), IoError otherwise. The message is "path: strerror(err)".
Status OpenForReadError(const std::string& path, int err);

// Writes `path` atomically. Until Commit() succeeds the data lives in a
// hidden temp file beside the target ("DIR/.NAME.tmp.PID.N"); the destructor
// removes an uncommitted temp file. Not thread-safe.
class AtomicFile {
 public:
  static Result<AtomicFile> Create(const std::string& path);
  AtomicFile() = default;
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&& other) noexcept;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  Status Write(std::string_view data);
  // fsync the data, rename over the target, fsync the directory.
  Status Commit();
  // Removes the temp file; the target is untouched.
  void Abandon();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  // The temp file's descriptor, for callers that stream with WriteAll().
  int fd() const { return fd_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::string temp_path_;
  uint64_t bytes_written_ = 0;
};

Status WriteFileAtomic(const std::string& path, std::string_view data);

// Writes all of `data` to fd, retrying on EINTR and short writes.
Status WriteAll(int fd, std::string_view data, std::string_view what);

// Creates `path` and its parents (like mkdir -p).
Status MakeDirs(const std::string& path);

bool FileExists(const std::string& path);

}  // namespace ek
