// Status and Result<T>: the error currency of every evenkeel library.
// Libraries never print, exit or throw across module boundaries; they return
// these, adding context at each layer ("pack: shard-0003.jsonl:1841: ...").
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ek {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad input from the user: flags, files, records
  kNotFound,            // a file or key that should exist does not
  kIoError,             // the OS said no (open, read, write, fsync, rename)
  kCorrupt,             // a file is truncated, foreign or internally inconsistent
  kUnsupported,         // valid input that uses a feature evenkeel does not implement
  kFailedPrecondition,  // the world is not in the state the operation needs
  kUnavailable,         // an optional component (NVML, a peer) is not there
  kInternal,            // a bug in evenkeel
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "prefix: message".
  Status WithContext(std::string_view prefix) const;
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status IoError(std::string message);
Status CorruptError(std::string message);
Status UnsupportedError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status InternalError(std::string message);
// An IoError that appends strerror(err) to `what`.
Status ErrnoError(std::string_view what, int err);

// Result<T> holds either a value or a non-OK Status; shaped like std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).ok()); }

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ek

#define EK_CONCAT_INNER_(a, b) a##b
#define EK_CONCAT_(a, b) EK_CONCAT_INNER_(a, b)

#define EK_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::ek::Status ek_status_ = (expr);        \
    if (!ek_status_.ok()) return ek_status_; \
  } while (0)

#define EK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define EK_ASSIGN_OR_RETURN(lhs, expr) \
  EK_ASSIGN_OR_RETURN_IMPL_(EK_CONCAT_(ek_result_, __LINE__), lhs, expr)
