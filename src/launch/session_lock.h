// One launcher per run (per node of a run): an exclusive flock(2) on
// LAUNCH_DIR/RUN_ID/launch.lock (node-N.lock when the run has several nodes, so
// that nodes sharing the launch directory do not block each other), taken
// without waiting when the launcher starts and held until it exits. The kernel
// drops a flock when the last descriptor of its open file description closes,
// so a launcher that dies (SIGKILL included) releases it; the descriptor is
// close-on-exec, so torchrun and the ranks never hold it.
//
// The file names its holder (host, pid, start time, run id, node) as one JSON
// object, written through Env in place (truncate and write: the inode must stay
// the one that is locked; a rename would put a new, unlocked file under the
// name). A launcher that finds the lock held refuses, naming the holder; one
// that finds the file naming a holder but the lock free takes it over and says
// whose it was (that launcher died: a clean exit empties the file first).
//
// NFS: Linux emulates flock on NFS with whole-file POSIX (fcntl) locks held by
// the server, which is why the descriptor is opened read-write (those locks
// need a writable descriptor); nothing is written through it. Locks from one
// client are seen by the others only on NFSv4 or NFSv3 with a working lockd,
// and a client that loses its lease loses the lock (docs/launch.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/status.h"

namespace ek::launch {

// Who holds (or held) a lock, as its file records it.
struct LockHolder {
  std::string host;
  int64_t pid = 0;
  double start = 0;  // Unix seconds
  std::string run_id;
  int node = 0;
};
std::string LockHolderToJson(const LockHolder& h);
// Strict (ek::JsonFields): errors name `name` and the field.
Result<LockHolder> LockHolderFromJson(std::string_view json, const std::string& name);

// "pid 4242 on host n1 (started 2026-12-01 11:02:03 UTC)".
std::string DescribeHolder(const LockHolder& h);

// The lock file of a session: SESSION/launch.lock for one node, SESSION/node-N.lock for several.
std::string LockPath(const std::string& session, int nodes, int node);

class SessionLock {
 public:
  // Takes the lock at `path` without waiting and records `me` in it (through
  // `files`, which also creates the file when it is missing). Errors:
  //   kUnavailable  another process holds it: the message names the file and the
  //                 holder from its record ("... is held by pid 4242 on host n1 ...");
  //   kIoError      the file cannot be created, opened, locked or written.
  static Result<SessionLock> Acquire(const std::string& path, const LockHolder& me, Env* files);

  SessionLock(SessionLock&& other) noexcept;
  SessionLock& operator=(SessionLock&& other) noexcept;
  SessionLock(const SessionLock&) = delete;
  SessionLock& operator=(const SessionLock&) = delete;
  // Closes the descriptor (the kernel releases the lock); the record stays, as
  // after a crash: call Release() for a clean exit.
  ~SessionLock();

  // Set when the lock was free but its file named a holder: that launcher died
  // without releasing it (the message to print names its pid).
  const std::optional<LockHolder>& stale() const { return stale_; }
  // Set when the lock was free and the file held something that is not a
  // holder record (a launcher killed while writing it): the reader's error.
  const std::string& stale_unreadable() const { return stale_unreadable_; }
  const std::string& path() const { return path_; }

  // Empties the record (so the next launcher finds no stale holder), then
  // releases the lock. An error names the file; the lock is released anyway.
  Status Release();

 private:
  SessionLock(std::string path, int fd, Env* files)
      : path_(std::move(path)), fd_(fd), files_(files) {}
  std::string path_;
  int fd_ = -1;
  Env* files_ = nullptr;
  std::optional<LockHolder> stale_;
  std::string stale_unreadable_;
};

}  // namespace ek::launch
