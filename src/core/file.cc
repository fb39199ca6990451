#include "core/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

namespace ek {

// A file that cannot be opened for reading is bad input, not an I/O failure:
// the CLI exits 65 for it and 74 for a disk that fails.
Status OpenForReadError(const std::string& path, int err) {
  Status st = ErrnoError(path, err);
  if (err == ENOENT || err == ENOTDIR) return NotFoundError(st.message());
  if (err == EACCES || err == EPERM || err == ELOOP || err == ENAMETOOLONG) return InvalidArgumentError(st.message());
  return st;
}

Result<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenForReadError(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": is a directory");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* addr = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return ErrnoError(path + ": mmap", err);
    }
    f.addr_ = addr;
  }
  ::close(fd);
  return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : addr_(o.addr_), size_(o.size_), path_(std::move(o.path_)) {
  o.addr_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    Reset();
    addr_ = o.addr_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.addr_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenForReadError(path, errno);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError(path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status WriteAll(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

namespace {
std::atomic<uint64_t> g_temp_counter{0};

std::string DirOf(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}
}  // namespace

Result<AtomicFile> AtomicFile::Create(const std::string& path) {
  AtomicFile f;
  f.path_ = path;
  auto slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  f.temp_path_ = dir + "." + base + ".tmp." + std::to_string(::getpid()) + "." +
                 std::to_string(g_temp_counter.fetch_add(1));
  f.fd_ = ::open(f.temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (f.fd_ < 0) return ErrnoError(f.temp_path_, errno);
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : fd_(o.fd_),
      path_(std::move(o.path_)),
      temp_path_(std::move(o.temp_path_)),
      bytes_written_(o.bytes_written_) {
  o.fd_ = -1;
  o.temp_path_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    Abandon();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    temp_path_ = std::move(o.temp_path_);
    bytes_written_ = o.bytes_written_;
    o.fd_ = -1;
    o.temp_path_.clear();
  }
  return *this;
}

AtomicFile::~AtomicFile() { Abandon(); }

void AtomicFile::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

Status AtomicFile::Write(std::string_view data) {
  if (fd_ < 0) return FailedPreconditionError(path_ + ": write after commit");
  EK_RETURN_IF_ERROR(WriteAll(fd_, data, temp_path_));
  bytes_written_ += data.size();
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (fd_ < 0) return FailedPreconditionError(path_ + ": commit twice");
  if (::fsync(fd_) != 0) return ErrnoError(temp_path_ + ": fsync", errno);
  if (::close(fd_) != 0) {
    fd_ = -1;
    return ErrnoError(temp_path_ + ": close", errno);
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoError(path_ + ": rename", errno);
  }
  temp_path_.clear();
  int dfd = ::open(DirOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  EK_RETURN_IF_ERROR(f.Write(data));
  return f.Commit();
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return IoError(path + ": " + ec.message());
  return Status::Ok();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace ek
