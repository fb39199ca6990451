// The agent's HTTP front: two read-only GETs and a bearer token, on the poll
// loop of http_server.h (bounded requests, idle and slow clients cut off).
#include "agent/agent_server.h"

#include <fmt/format.h>

#include "net/http_server.h"

namespace ek::watch {

namespace {

class PollAgentServer : public AgentServer {
  using Request = net::HttpServer::Request;
  using Response = net::HttpServer::Response;

 public:
  PollAgentServer(Agent* agent, std::string token) : agent_(agent), token_(std::move(token)) {
    server_.SetFilter([this](const Request& req) -> std::optional<Response> {
      if (token_.empty()) return std::nullopt;
      std::string auth = req.Header("Authorization");
      std::string_view given = std::string_view(auth).substr(std::min<size_t>(auth.size(), 7));
      if (auth.starts_with("Bearer ") && net::ConstantTimeEquals(given, token_))
        return std::nullopt;
      auto res = Response::Text(401, "unauthorized\n");
      res.headers.emplace_back("WWW-Authenticate", "Bearer");
      return res;
    });
    server_.Get("/metrics", [this](const Request&) {
      Response res = Response::Text(200, AgentStatusToMetrics(agent_->Snapshot()));
      res.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return res;
    });
    server_.Get("/status", [this](const Request&) {
      Response res = Response::Text(200, AgentStatusToJson(agent_->Snapshot()));
      res.content_type = "application/json";
      return res;
    });
    server_.Get("/", [](const Request&) {
      return Response::Text(200, "evenkeel agent: /metrics (Prometheus), /status (JSON)\n");
    });
  }

  Result<int> Bind(const std::string& listen) override {
    auto port = server_.Bind(listen);
    if (!port.ok()) return port.status().WithContext("agent");
    return port;
  }
  Status Serve() override {
    Status st = server_.Serve();
    if (!st.ok()) return st.WithContext("agent");
    return Status::Ok();
  }
  void Stop() override { server_.Stop(); }

 private:
  Agent* agent_;
  std::string token_;
  net::HttpServer server_;
};

}  // namespace

Result<std::unique_ptr<AgentServer>> AgentServer::Create(Agent* agent, std::string token) {
  return std::unique_ptr<AgentServer>(std::make_unique<PollAgentServer>(agent, std::move(token)));
}

}  // namespace ek::watch
