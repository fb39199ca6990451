#include "core/env.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "core/file.h"

namespace ek {

namespace {

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, uint64_t offset)
      : path_(std::move(path)), fd_(fd), offset_(offset), kicked_(offset) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return FailedPreconditionError(path_ + ": write after close");
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(fmt::format("{}: write at byte {}", path_, offset_), errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
      offset_ += static_cast<uint64_t>(n);
      size_ += static_cast<uint64_t>(n);
    }
    // Every 8 MB, start the writeback of what was written so far (sync_file_range's
    // WRITE alone: it waits for nothing but a full device queue), so that the disk
    // works while the writer computes and the final fsync finds little left to write,
    // however much the kernel would let stay dirty (a tenth of memory before its own
    // writeback starts: tens of GB on a training node). Advisory: an error here
    // (a file system without it) comes back from fsync if it matters.
    if (offset_ - kicked_ >= kWritebackBytes) {
      (void)::sync_file_range(fd_, static_cast<off_t>(kicked_),
                              static_cast<off_t>(offset_ - kicked_), SYNC_FILE_RANGE_WRITE);
      kicked_ = offset_;
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (fd_ < 0) return FailedPreconditionError(path_ + ": fsync after close");
    if (::fsync(fd_) != 0) return ErrnoError(path_ + ": fsync", errno);
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    int rc = ::close(fd_);
    fd_ = -1;
    // After close(2) fails the descriptor is gone all the same (Linux).
    if (rc != 0) return ErrnoError(path_ + ": close", errno);
    return Status::Ok();
  }

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t offset_ = 0;  // for error messages: where in the file the write was
  static constexpr uint64_t kWritebackBytes = 8u << 20;
  uint64_t kicked_ = 0;  // writeback started for the bytes before this offset
  uint64_t size_ = 0;
};

Result<std::unique_ptr<WritableFile>> OpenForWrite(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
  if (fd < 0) return ErrnoError(path + ": open for writing", errno);
  uint64_t offset = 0;
  if (flags & O_APPEND) {
    struct stat st;
    if (::fstat(fd, &st) == 0) offset = static_cast<uint64_t>(st.st_size);
  }
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd, offset));
}

Status FsyncPath(const std::string& path, int flags, std::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags);
  if (fd < 0) return ErrnoError(fmt::format("{}: open for {}", path, what), errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoError(fmt::format("{}: {}", path, what), err);
  return Status::Ok();
}

Result<FileInfo> StatPath(const std::string& path, bool link) {
  struct stat st;
  if ((link ? ::lstat(path.c_str(), &st) : ::stat(path.c_str(), &st)) != 0) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFoundError(ErrnoError(path, err).message());
    return ErrnoError(path + ": stat", err);
  }
  FileInfo info;
  info.kind = S_ISREG(st.st_mode)   ? FileInfo::Kind::kFile
              : S_ISDIR(st.st_mode) ? FileInfo::Kind::kDirectory
              : S_ISLNK(st.st_mode) ? FileInfo::Kind::kSymlink
                                    : FileInfo::Kind::kOther;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mtime =
      static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
  return info;
}

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    return OpenForWrite(path, O_TRUNC);
  }
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override {
    return OpenForWrite(path, O_APPEND);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoError(fmt::format("{}: rename to {}", from, to), errno);
    }
    return Status::Ok();
  }
  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) {
      int err = errno;
      Status st = ErrnoError(path + ": remove", err);
      return err == ENOENT ? NotFoundError(st.message()) : st;
    }
    return Status::Ok();
  }
  Status RemoveTree(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return IoError(fmt::format("{}: remove: {}", path, ec.message()));
    return Status::Ok();
  }
  Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return IoError(fmt::format("{}: create directory: {}", path, ec.message()));
    return Status::Ok();
  }
  Status SyncDir(const std::string& dir) override { return FsyncPath(dir, O_DIRECTORY, "fsync"); }
  Status SyncFile(const std::string& path) override { return FsyncPath(path, 0, "fsync"); }

  Result<std::string> ReadFile(const std::string& path) override { return ek::ReadFile(path); }

  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return OpenDirError(dir, ec.value());
    std::vector<std::string> names;
    for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    if (ec) return ErrnoError(fmt::format("{}: read directory", dir), ec.value());
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<FileInfo> Stat(const std::string& path) override { return StatPath(path, false); }
  Result<FileInfo> LinkStat(const std::string& path) override { return StatPath(path, true); }

  Result<double> FreeBytes(const std::string& path) override {
    struct statvfs vfs;
    if (::statvfs(path.c_str(), &vfs) != 0) return ErrnoError(path + ": statvfs", errno);
    return static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize);
  }

  std::optional<std::string> GetVar(const std::string& name) override {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  }

  std::string HostName() override {
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) != 0) return "";
    return host;
  }

  Clock* clock() override { return Clock::Default(); }
};

}  // namespace

Env* Env::Default() {
  static PosixEnv* env = new PosixEnv();  // never destroyed: usable from static destructors
  return env;
}

}  // namespace ek
