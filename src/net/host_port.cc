#include "net/host_port.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/parse.h"

namespace ek::net {

bool IsLoopbackHost(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

Status SplitHostPort(const std::string& s, std::string* host, int* port) {
  size_t colon = s.rfind(':');
  std::string p = colon == std::string::npos ? s : s.substr(colon + 1);
  *host = colon == std::string::npos ? "127.0.0.1" : s.substr(0, colon);
  if (host->empty()) *host = "127.0.0.1";
  auto n = ParseIntIn(p, 0, 65535);
  if (!n) return InvalidArgumentError(fmt::format("'{}': expected HOST:PORT", s));
  *port = static_cast<int>(*n);
  return Status::Ok();
}

}  // namespace ek::net
