#include "core/status.h"

#include <cstring>

namespace ek {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kIoError:
      return "i/o error";
    case StatusCode::kCorrupt:
      return "corrupt";
    case StatusCode::kUnsupported:
      return "unsupported";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string m(prefix);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

std::string Status::ToString() const { return ok() ? "ok" : message_; }

Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
Status CorruptError(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
Status UnsupportedError(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

Status ErrnoError(std::string_view what, int err) {
  std::string m(what);
  m += ": ";
  m += std::strerror(err);
  return IoError(std::move(m));
}

}  // namespace ek
