// The agent's HTTP front: GET /metrics and GET /status on a net::HttpServer.
#pragma once

#include <memory>
#include <string>

#include "agent/agent.h"
#include "core/status.h"

namespace ek::watch {

// Serves GET /metrics and GET /status from `agent` (which must outlive it) on
// an HttpServer (net/http_server.h: its limits against idle, slow and junk
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

}  // namespace ek::watch
