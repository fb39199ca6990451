// HTTP for the agent (server) and the watcher (client to agents and sinks).
// The only files that include cpp-httplib are agent_server.cc and http.cc.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "watch/agent.h"

namespace ek::watch {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// The HTTP client seam. Implementations are thread-safe (agents are polled in
// parallel). A transport failure (refused, timeout) is Unavailable; any HTTP
// status comes back as a response.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  virtual Result<HttpResponse> Send(const std::string& method, const std::string& url,
                                    const std::string& body,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    double timeout_s) = 0;
};
std::unique_ptr<HttpClient> MakeHttpClient();

// Bounds of what the agent accepts: it serves two read-only GETs.
inline constexpr size_t kMaxRequestBodyBytes = 1024;
inline constexpr double kAgentReadTimeoutS = 5;

// Serves GET /metrics and GET /status from `agent` (which must outlive it).
// With a non-empty token every request needs "Authorization: Bearer TOKEN"
// (401 otherwise). Other methods are 405; bodies over kMaxRequestBodyBytes 413.
class AgentServer {
 public:
  static Result<std::unique_ptr<AgentServer>> Create(Agent* agent, std::string token);
  virtual ~AgentServer() = default;
  // Binds "HOST:PORT" (port 0: any free one). Returns the bound port.
  virtual Result<int> Bind(const std::string& listen) = 0;
  // Serves until Stop(); blocks.
  virtual Status Serve() = 0;
  virtual void Stop() = 0;
};

// "127.0.0.1:9464" -> host and port; a bare port means 127.0.0.1.
Status SplitHostPort(const std::string& s, std::string* host, int* port);

}  // namespace ek::watch
