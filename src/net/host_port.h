// HTTP for the agent (server) and the watcher (client to agents and sinks).
// The client is the one client, net/http_client.h (the Prometheus scraper's
// too); the servers are http_server.h's poll loop.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "net/http_client.h"
#include "watch/agent.h"

namespace ek::watch {

// The one client, under the names the watcher's code uses.
using net::HttpClient;
using net::HttpResponse;
using net::MakeHttpClient;

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

}  // namespace ek::watch
