#include "watch/live_page.h"

#include <httplib.h>

#include <chrono>

#include <fmt/core.h>

#include "report/html.h"
#include "watch/http.h"

namespace ek::watch {

namespace {

bool SameSecret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.size() ? b.size() : 1)]);
  return diff == 0 && !b.empty();
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

double Mono() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

struct LivePage::Impl {
  LivePageOptions o;
  std::mutex mu;
  std::unique_ptr<report::Recorder> rec;
  std::map<std::string, report::Incident> seen;  // by incident id
  std::string cached;
  double cached_at = -1e300;
  httplib::Server server;
  std::thread thread;
};

Result<std::unique_ptr<LivePage>> LivePage::Start(LivePageOptions o) {
  std::string host;
  int port = 0;
  EK_RETURN_IF_ERROR(SplitHostPort(o.listen, &host, &port));
  if (!IsLoopback(host) && o.token.empty()) {
    return InvalidArgumentError(fmt::format(
        "watch --http {}: listening beyond loopback needs a token (--http-token or EVENKEEL_PAGE_TOKEN)", o.listen));
  }
  std::unique_ptr<LivePage> page(new LivePage());
  page->impl_ = std::make_unique<Impl>();
  Impl* impl = page->impl_.get();
  impl->o = o;
  std::vector<report::RankInfo> ranks;
  for (size_t h = 0; h < o.hosts.size(); ++h) {
    for (int g = 0; g < o.gpus_per_node; ++g) ranks.push_back({static_cast<int>(h) * o.gpus_per_node + g, o.hosts[h], g});
  }
  impl->rec = std::make_unique<report::Recorder>(ranks);
  impl->rec->run = o.run;
  impl->server.set_read_timeout(5, 0);
  impl->server.set_write_timeout(5, 0);
  impl->server.set_pre_routing_handler([impl](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "GET" && req.method != "HEAD") {
      res.status = 405;
      res.set_header("Allow", "GET");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!impl->o.token.empty()) {
      std::string auth = req.get_header_value("Authorization");
      std::string given = auth.starts_with("Bearer ") ? auth.substr(7) : req.get_param_value("token");
      if (!SameSecret(given, impl->o.token)) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer");
        res.set_content("unauthorized\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  LivePage* self = page.get();
  impl->server.Get("/", [self](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(report::AssembleHtml(self->ModelJson()), "text/html; charset=utf-8");
  });
  impl->server.Get("/data.json", [self](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(self->ModelJson(), "application/json");
  });
  int bound = port == 0 ? impl->server.bind_to_any_port(host) : (impl->server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return UnavailableError(fmt::format("watch --http: cannot listen on {}", o.listen));
  page->port_ = bound;
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  return page;
}

LivePage::~LivePage() {
  if (impl_) {
    impl_->server.stop();
    if (impl_->thread.joinable()) impl_->thread.join();
  }
}

void LivePage::OnRound(double now, const std::vector<AgentPoll>& polls, const triage::Assessment& assessment,
                       const std::map<std::string, Incident>& open) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  report::Recorder& rec = *impl_->rec;
  const auto& hosts = impl_->o.hosts;
  const int gpn = impl_->o.gpus_per_node;
  double tok_s = 0;
  int64_t step = -1;
  bool beating = false;
  for (size_t i = 0; i < polls.size(); ++i) {
    const AgentPoll& p = polls[i];
    if (!p.ok) continue;
    int hi = -1;
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (hosts[h] == p.status.host || hosts[h] == p.target) hi = static_cast<int>(h);
    }
    if (hi < 0 && i < hosts.size()) hi = static_cast<int>(i);  // agents are given in node order
    for (const GpuReading& g : p.status.gpus) {
      if (hi < 0 || g.gpu < 0 || g.gpu >= gpn) continue;
      rec.AddReading(hi * gpn + g.gpu, p.received - g.age_s, g.util_pct, g.power_w);
    }
    for (const RankReading& r : p.status.ranks) {
      if (!r.alive) continue;
      beating = true;
      tok_s += r.hb.tok_s;
      step = std::max(step, r.hb.step);
    }
  }
  if (!rec.ranks().empty() && !polls.empty()) rec.AddAssessment(assessment);
  if (beating) {
    rec.AddPoint(report::Recorder::Series::kTokensPerS, now, tok_s);
    if (step >= 0) rec.AddPoint(report::Recorder::Series::kStep, now, static_cast<double>(step));
  }
  // Incidents: the open ones as they are now; the ones that closed keep their end.
  for (auto& [id, inc] : impl_->seen) {
    bool still = false;
    for (const auto& [key, o] : open) still = still || o.id == id;
    if (!still && !inc.until) inc.until = now;
  }
  for (const auto& [key, o] : open) {
    report::Incident inc;
    inc.source = "watcher";
    inc.kind = std::string(KindName(o.finding.kind));
    inc.summary = o.finding.summary;
    inc.ranks = o.finding.ranks;
    inc.hosts = o.finding.hosts;
    inc.since = o.finding.since > 0 ? o.finding.since : o.opened;
    inc.evidence = o.finding.evidence;
    inc.gpu_hours = o.finding.gpu_hours;
    impl_->seen[o.id] = inc;
  }
  rec.incidents.clear();
  for (const auto& [id, inc] : impl_->seen) rec.incidents.push_back(inc);
}

std::string LivePage::ModelJson() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  double now = Mono();
  if (now - impl_->cached_at >= impl_->o.poll_s) {
    report::ModelOptions mo;
    mo.live = true;
    mo.poll_s = impl_->o.poll_s;
    mo.interval_s = impl_->o.poll_s;
    impl_->rec->notes.clear();
    if (impl_->rec->readings() == 0) impl_->rec->notes.push_back("no GPU readings from the agents yet");
    impl_->cached = impl_->rec->ToJson(mo);
    impl_->cached_at = now;
  }
  return impl_->cached;
}

}  // namespace ek::watch
