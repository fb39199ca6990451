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
  if (err == EISDIR) return InvalidArgumentError(path + ": is a directory, expected a file");
  Status st = ErrnoError(path, err);
  if (err == ENOENT || err == ENOTDIR) return NotFoundError(st.message());
  if (err == EACCES || err == EPERM || err == ELOOP || err == ENAMETOOLONG)
    return InvalidArgumentError(st.message());
  return st;
}

Result<int> OpenFileForRead(const std::string& path, struct stat* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenForReadError(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path, err);
  }
  // open(O_RDONLY) succeeds on a directory; the read after it would fail with
  // EISDIR, or mmap with ENODEV. Say what was expected instead.
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return OpenForReadError(path, EISDIR);
  }
  if (out != nullptr) *out = st;
  return fd;
}

Status OpenDirError(const std::string& path, int err) {
  if (err == ENOENT) return NotFoundError(path + ": no such directory");
  if (err == ENOTDIR) {
    // Either path itself is a file, or one of its parents is.
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      return InvalidArgumentError(path + (S_ISREG(st.st_mode)
                                              ? ": is a file, expected a directory"
                                              : ": is not a directory, expected a directory"));
    }
    return NotFoundError(path + ": no such directory (a parent is not a directory)");
  }
  Status st = ErrnoError(path, err);
  if (err == EACCES || err == EPERM || err == ELOOP || err == ENAMETOOLONG)
    return InvalidArgumentError(st.message());
  return st;
}

Status CheckDirectory(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OpenDirError(path, errno);
  if (!S_ISDIR(st.st_mode)) return OpenDirError(path, ENOTDIR);
  return Status::Ok();
}

Result<MappedFile> MappedFile::Open(const std::string& path) {
  struct stat st;
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path, &st));
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

size_t MappedFile::readable() const {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (size_ + page - 1) / page * page;
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
  EK_ASSIGN_OR_RETURN(int fd, OpenFileForRead(path));
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
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? "." : dir.string();
}
}  // namespace

Result<AtomicFile> AtomicFile::Create(const std::string& path, Env* env) {
  AtomicFile f;
  f.env_ = env;
  f.path_ = path;
  std::filesystem::path temp(path);  // DIR/NAME -> DIR/.NAME.tmp.PID.N
  temp.replace_filename("." + temp.filename().string() + ".tmp." + std::to_string(::getpid()) +
                        "." + std::to_string(g_temp_counter.fetch_add(1)));
  f.temp_path_ = temp.string();
  auto file = env->NewWritableFile(f.temp_path_);
  if (!file.ok()) {
    f.temp_path_.clear();  // nothing was created
    return file.status().WithContext(path);
  }
  f.file_ = std::move(file).value();
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : env_(o.env_),
      file_(std::move(o.file_)),
      path_(std::move(o.path_)),
      temp_path_(std::move(o.temp_path_)),
      bytes_written_(o.bytes_written_) {
  o.temp_path_.clear();
}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    Abandon();
    env_ = o.env_;
    file_ = std::move(o.file_);
    path_ = std::move(o.path_);
    temp_path_ = std::move(o.temp_path_);
    bytes_written_ = o.bytes_written_;
    o.temp_path_.clear();
  }
  return *this;
}

AtomicFile::~AtomicFile() { Abandon(); }

void AtomicFile::Abandon() {
  if (file_) (void)file_->Close();
  file_.reset();
  if (!temp_path_.empty()) (void)env_->RemoveFile(temp_path_);
  temp_path_.clear();
}

Status AtomicFile::Write(std::string_view data) {
  if (!file_) return FailedPreconditionError(path_ + ": write after commit");
  EK_RETURN_IF_ERROR(file_->Append(data).WithContext(path_));
  bytes_written_ += data.size();
  return Status::Ok();
}

Status AtomicFile::Sync() {
  if (!file_) {
    return temp_path_.empty() ? FailedPreconditionError(path_ + ": sync after commit")
                              : Status::Ok();
  }
  EK_RETURN_IF_ERROR(file_->Sync().WithContext(path_));
  Status closed = file_->Close();
  file_.reset();
  return closed.WithContext(path_);
}

Status AtomicFile::Commit() {
  if (temp_path_.empty()) return FailedPreconditionError(path_ + ": commit twice");
  EK_RETURN_IF_ERROR(Sync());
  EK_RETURN_IF_ERROR(env_->RenameFile(temp_path_, path_).WithContext(path_));
  temp_path_.clear();
  return env_->SyncDir(DirOf(path_)).WithContext(path_);
}

Status WriteFileAtomic(const std::string& path, std::string_view data, Env* env) {
  EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path, env));
  EK_RETURN_IF_ERROR(f.Write(data));
  return f.Commit();
}

Status MakeDirs(const std::string& path, Env* env) { return env->CreateDirs(path); }

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace ek
