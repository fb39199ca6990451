#include "launch/session_lock.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

#include "core/file.h"
#include "core/json_fields.h"
#include "core/json_out.h"

namespace ek::launch {

std::string LockHolderToJson(const LockHolder& h) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("host").Str(h.host).Key("pid").Int(h.pid).Key("start").Fixed(h.start, 3);
  w.Key("run_id").Str(h.run_id).Key("node").Int(h.node).EndObject();
  return w.Line();
}

Result<LockHolder> LockHolderFromJson(std::string_view json, const std::string& name) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(json, name));
  LockHolder h;
  EK_RETURN_IF_ERROR(f.Str("host", &h.host));
  EK_RETURN_IF_ERROR(f.Int("pid", 1, std::numeric_limits<int64_t>::max(), &h.pid));
  EK_RETURN_IF_ERROR(f.Num("start", &h.start));
  EK_RETURN_IF_ERROR(f.Str("run_id", &h.run_id));
  EK_RETURN_IF_ERROR(f.IntIn("node", 0, std::numeric_limits<int>::max(), &h.node));
  return h;
}

std::string DescribeHolder(const LockHolder& h) {
  time_t t = static_cast<time_t>(h.start);
  struct tm tm = {};
  char when[64] = "?";
  if (::gmtime_r(&t, &tm) != nullptr) ::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return fmt::format("pid {} on host {} (started {})", h.pid, h.host, when);
}

std::string LockPath(const std::string& session, int nodes, int node) {
  return nodes > 1 ? fmt::format("{}/node-{}.lock", session, node) : session + "/launch.lock";
}

namespace {

bool Blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// Writes `data` over the file's contents in place (the same inode: the locked one).
Status Overwrite(Env* files, const std::string& path, std::string_view data) {
  EK_ASSIGN_OR_RETURN(auto file, files->NewWritableFile(path));
  if (!data.empty()) EK_RETURN_IF_ERROR(file->Append(data));
  EK_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

// Opens the lock file read-write (see the header: NFS), creating it through `files`.
Result<int> OpenLockFile(const std::string& path, Env* files) {
  for (int tries = 0;; ++tries) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != ENOENT || tries > 0) return ErrnoError(path + ": open for locking", errno);
    // Created empty; O_APPEND leaves a file another launcher created meanwhile as it is.
    EK_ASSIGN_OR_RETURN(auto created, files->NewAppendableFile(path));
    EK_RETURN_IF_ERROR(created->Close());
  }
}

// The holder named in a lock someone else holds. Its record is written just
// after the lock is taken: an empty or partial one is read again for a while.
std::string HeldBy(Env* env, const std::string& path) {
  std::string why;
  for (int i = 0; i < 20; ++i) {
    auto text = env->ReadFile(path);
    if (text.ok() && !Blank(*text)) {
      auto h = LockHolderFromJson(*text, path);
      if (h.ok())
        return fmt::format("{}, launching run {} (node {})", DescribeHolder(*h), h->run_id,
                           h->node);
      why = h.status().message();
    } else {
      why = text.ok() ? "the holder has not written its record yet" : text.status().message();
    }
    env->clock()->SleepFor(0.1);
  }
  return "another process (its record cannot be read: " + why + ")";
}

}  // namespace

Result<SessionLock> SessionLock::Acquire(const std::string& path, const LockHolder& me,
                                         Env* files) {
  while (true) {
    EK_ASSIGN_OR_RETURN(int fd, OpenLockFile(path, files));
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) {
        return UnavailableError(
            fmt::format("{} is held by {}: another evenkeel launch of this run is running (one "
                        "launcher per run and "
                        "node); wait for it to end, or stop it",
                        path, HeldBy(files, path)));
      }
      return ErrnoError(path + ": flock", err);
    }
    // The file may have been replaced (removed and created again) between the open and
    // the lock: then this lock is on an inode nobody else will look at. Try again.
    struct stat locked, named;
    if (::fstat(fd, &locked) != 0 || ::stat(path.c_str(), &named) != 0 ||
        locked.st_ino != named.st_ino || locked.st_dev != named.st_dev) {
      ::close(fd);
      continue;
    }
    SessionLock lock(path, fd, files);
    if (auto before = ReadFile(path); before.ok() && !Blank(*before)) {
      auto h = LockHolderFromJson(*before, path);
      if (h.ok()) {
        lock.stale_ = *h;
      } else {
        lock.stale_unreadable_ = h.status().message();
      }
    }
    if (Status st = Overwrite(files, path, LockHolderToJson(me)); !st.ok()) {
      return st.WithContext("launch: cannot record this launcher in its lock");
    }
    return lock;
  }
}

SessionLock::SessionLock(SessionLock&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(other.fd_),
      files_(other.files_),
      stale_(std::move(other.stale_)),
      stale_unreadable_(std::move(other.stale_unreadable_)) {
  other.fd_ = -1;
}

SessionLock& SessionLock::operator=(SessionLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    files_ = other.files_;
    stale_ = std::move(other.stale_);
    stale_unreadable_ = std::move(other.stale_unreadable_);
    other.fd_ = -1;
  }
  return *this;
}

SessionLock::~SessionLock() {
  if (fd_ >= 0) ::close(fd_);
}

Status SessionLock::Release() {
  if (fd_ < 0) return Status::Ok();
  // Emptied while still held: the next holder's record is never the one truncated.
  Status st = Overwrite(files_, path_, "");
  ::close(fd_);
  fd_ = -1;
  return st.ok()
             ? st
             : st.WithContext(
                   "launch: cannot clear the lock's record (the next launch will call it stale)");
}

}  // namespace ek::launch
