// The agent's HTTP front: two read-only GETs, a bearer token, bounded requests.
#include <fmt/format.h>
#include <httplib.h>

#include "watch/http.h"

namespace ek::watch {

namespace {

// Compares without an early exit, so response time does not leak the token.
bool SameSecret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.size() ? b.size() : 1)]);
  return diff == 0 && !b.empty();
}

class HttplibAgentServer : public AgentServer {
 public:
  HttplibAgentServer(Agent* agent, std::string token) : agent_(agent), token_(std::move(token)) {
    server_.set_payload_max_length(kMaxRequestBodyBytes);
    server_.set_read_timeout(static_cast<time_t>(kAgentReadTimeoutS), 0);
    server_.set_write_timeout(static_cast<time_t>(kAgentReadTimeoutS), 0);
    server_.set_keep_alive_max_count(100);
    server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (req.method != "GET" && req.method != "HEAD") {
        res.status = 405;
        res.set_header("Allow", "GET");
        res.set_content("read-only: GET /metrics, GET /status\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (!token_.empty()) {
        std::string auth = req.get_header_value("Authorization");
        if (!auth.starts_with("Bearer ") || !SameSecret(std::string_view(auth).substr(7), token_)) {
          res.status = 401;
          res.set_header("WWW-Authenticate", "Bearer");
          res.set_content("unauthorized\n", "text/plain");
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(AgentStatusToMetrics(agent_->Snapshot()), "text/plain; version=0.0.4; charset=utf-8");
    });
    server_.Get("/status", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(AgentStatusToJson(agent_->Snapshot()), "application/json");
    });
    server_.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("evenkeel agent: /metrics (Prometheus), /status (JSON)\n", "text/plain");
    });
  }

  Result<int> Bind(const std::string& listen) override {
    std::string host;
    int port = 0;
    EK_RETURN_IF_ERROR(SplitHostPort(listen, &host, &port));
    int bound = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
    if (bound <= 0) return UnavailableError(fmt::format("agent: cannot listen on {}", listen));
    return bound;
  }
  Status Serve() override {
    if (!server_.listen_after_bind()) return IoError("agent: the HTTP server stopped unexpectedly");
    return Status::Ok();
  }
  void Stop() override { server_.stop(); }

 private:
  Agent* agent_;
  std::string token_;
  httplib::Server server_;
};

}  // namespace

Result<std::unique_ptr<AgentServer>> AgentServer::Create(Agent* agent, std::string token) {
  return std::unique_ptr<AgentServer>(std::make_unique<HttplibAgentServer>(agent, std::move(token)));
}

}  // namespace ek::watch
