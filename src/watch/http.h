// HTTP for the agent (server) and the watcher (client to agents and sinks).
// The client is cpp-httplib's (through telemetry/http_request.h); the servers
// are http_server.h's poll loop.
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
// parallel). A transport failure (refused, timeout) is Unavailable, its
// message naming the method, the URL and the reason ("GET http://n1:9464/status:
// cannot connect to n1:9464: Connection refused"); any HTTP status comes back
// as a response.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  virtual Result<HttpResponse> Send(const std::string& method, const std::string& url,
                                    const std::string& body,
                                    const std::vector<std::pair<std::string, std::string>>& headers,
                                    double timeout_s) = 0;
};
std::unique_ptr<HttpClient> MakeHttpClient();

// Serves GET /metrics and GET /status from `agent` (which must outlive it) on
// an HttpServer (http_server.h: its limits against idle, slow and junk
// clients). With a non-empty token every request needs "Authorization: Bearer
// TOKEN" (401 otherwise). Other methods are 405; any request body 413.
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

// Whether a listen host stays on this machine: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(std::string_view host);

// Why a TCP connection to `url`'s host and port cannot be made, as the OS says
// it ("cannot connect to n1:9464: Connection refused", "cannot resolve n1: Name
// or service not known", "no answer from n1:9464 within 2.0 s"), by trying
// once; "" when the connection succeeds. cpp-httplib only says "Connection".
std::string DescribeConnectFailure(const std::string& url, double timeout_s);

}  // namespace ek::watch
