// FaultInjectionEnv: an Env for tests that passes every call to another Env
// (usually Env::Default(), on a scratch directory) and fails the calls that
// match a rule, the way a full or failing disk would:
//
//   FaultInjectionEnv env(Env::Default());
//   env.Add(FaultRule::Fail(FileOp::kAppend, "manifest.json", ENOSPC));
//   env.Add(FaultRule::ShortWrite("rank-00001", 100));       // 100 bytes land, then ENOSPC
//   env.Add(FaultRule::Fail(FileOp::kRename, "", EIO).Nth(2));  // the second rename fails
//
// An injected error reads like a real one ("PATH: write at byte N: No space
// left on device"), so a test asserts on what a user would see. A short write
// really writes the prefix to the file before failing, leaving the half file
// a full disk leaves. Rules are matched in the order added; the first that
// fires decides. Thread-safe (FinalizeCheckpoint syncs from several threads).
// Reads (ReadFile, ListDir, Stat) fail the same way, by rule. Everything
// else (environment variables, the host name, the clock) passes to the base
// unless set here, so one FaultInjectionEnv is a test's whole fake machine.
// Test-only: linked into test binaries (ek_core_testing), never the CLI.
#pragma once

#include <cerrno>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/env.h"

namespace ek {

enum class FileOp {
  kOpen,        // NewWritableFile, NewAppendableFile
  kAppend,      // WritableFile::Append (of at least one byte)
  kSync,        // WritableFile::Sync
  kClose,       // WritableFile::Close
  kRename,      // RenameFile (the rule's path matches `from` or `to`)
  kRemove,      // RemoveFile
  kRemoveTree,  // RemoveTree
  kCreateDirs,  // CreateDirs
  kSyncDir,     // SyncDir
  kSyncFile,    // SyncFile
  kRead,        // ReadFile
  kList,        // ListDir
  kStat,        // Stat, LinkStat
};
std::string_view FileOpName(FileOp op);

struct FaultRule {
  FileOp op = FileOp::kAppend;
  std::string path_contains;  // "" matches every path
  int err = EIO;
  int nth = 1;    // the first matching call that fails (1-based)
  int times = 1;  // how many matching calls fail from the nth on; -1: all of them
  // kAppend only: write this many bytes of the call first, then fail with
  // `err` (a short write). -1: write nothing.
  int64_t short_bytes = -1;

  static FaultRule Fail(FileOp op, std::string path_contains, int err);
  static FaultRule ShortWrite(std::string path_contains, int64_t bytes, int err = ENOSPC);
  FaultRule Nth(int n) const;
  FaultRule Times(int n) const;
  FaultRule Always() const { return Times(-1); }
};

class FaultInjectionEnv final : public EnvWrapper {
 public:
  // `base` must outlive this Env and every file it opens.
  explicit FaultInjectionEnv(Env* base) : EnvWrapper(base), base_(base) {}

  // The environment this Env reports instead of the process's: once any
  // variable is set, GetVar sees only the variables set here.
  void SetVar(const std::string& name, const std::string& value);
  void SetVars(std::map<std::string, std::string> vars);
  void SetHostName(std::string host);
  // FreeBytes answers this for every path; nullopt: the free space cannot be
  // learnt ("PATH: statvfs: no answer", kUnavailable).
  void SetFreeBytes(std::optional<double> bytes);
  // clock() returns `clock` (a FakeClock) instead of the base's.
  void SetClock(Clock* clock);

  void Add(FaultRule rule);
  // Removes every rule: the disk is healthy again. Counts are kept.
  void Clear();
  // Faults injected so far.
  int injected() const;
  // Calls of `op` seen so far, matched or not (a test checks a path was taken).
  int calls(FileOp op) const;

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveTree(const std::string& path) override;
  Status CreateDirs(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
  Status SyncFile(const std::string& path) override;
  Result<std::string> ReadFile(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& dir) override;
  Result<FileInfo> Stat(const std::string& path) override;
  Result<FileInfo> LinkStat(const std::string& path) override;
  Result<double> FreeBytes(const std::string& path) override;
  std::optional<std::string> GetVar(const std::string& name) override;
  std::string HostName() override;
  Clock* clock() override;

  // The rule that fires for this call, if any (counts the call). Used by the
  // files this Env opens.
  bool Fires(FileOp op, const std::string& path, const std::string& other, FaultRule* fired);

 private:
  struct Slot {
    FaultRule rule;
    int matched = 0;
  };
  Env* base_;
  mutable std::mutex mu_;
  std::vector<Slot> rules_;
  int injected_ = 0;
  int calls_[13] = {};
  std::optional<std::map<std::string, std::string>> vars_;
  std::optional<std::string> host_;
  std::optional<std::optional<double>> free_bytes_;
  Clock* clock_ = nullptr;
};

// The ways one file write can fail, each a rule on paths containing
// `path_contains` and the text its error must hold (the operation and
// strerror). A writer's test runs each and checks the error names the path,
// the old output survives and a re-run without the fault completes:
// open (ENOSPC), write (ENOSPC, EIO), short write (7 bytes, then ENOSPC),
// fsync (EIO), close (EIO), rename (EIO).
struct WriteFault {
  std::string name;
  FaultRule rule;
  std::vector<std::string> expect;
};
std::vector<WriteFault> WriteFaults(const std::string& path_contains);

}  // namespace ek
