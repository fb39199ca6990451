// One HTTP request over cpp-httplib, shared by the Prometheus scraper and the
// watcher's agent polls and alert sinks (watch/http.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ek::telemetry {

struct HttpReply {
  int status = 0;
  std::string body;
};

// GET (body ignored) or POST with a JSON body. `timeout_s` bounds connect,
// read and write each. A transport failure (refused, timeout) is Unavailable,
// naming the method and URL; any HTTP status comes back as a reply.
Result<HttpReply> HttpRequest(const std::string& method, const std::string& url, const std::string& body,
                              const std::vector<std::pair<std::string, std::string>>& headers, double timeout_s);

}  // namespace ek::telemetry
