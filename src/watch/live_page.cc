#include "watch/live_page.h"

#include <fmt/core.h>

#include "net/host_port.h"
#include "net/http_server.h"
#include "report/html.h"

namespace ek::watch {

struct LivePage::Impl {
  LivePageOptions o;
  std::mutex mu;
  std::unique_ptr<report::Recorder> rec;
  std::map<std::string, report::Incident> seen;  // by incident id
  // The model and the page built around it, shared with the connections that
  // are still sending them (each is ~11 MB for a big run: never copied).
  std::shared_ptr<const std::string> model, html;
  std::shared_ptr<const std::string> html_model;  // the model `html` was built around
  double cached_at = -1e300;
  net::HttpServer server;
  std::thread thread;

  // Rebuilds the model when older than poll_s. Called with mu held.
  void Refresh();
};

Result<std::unique_ptr<LivePage>> LivePage::Start(LivePageOptions o) {
  std::string host;
  int port = 0;
  EK_RETURN_IF_ERROR(net::SplitHostPort(o.listen, &host, &port));
  if (!net::IsLoopbackHost(host) && o.token.empty()) {
    return InvalidArgumentError(
        fmt::format("watch --http {}: listening beyond loopback needs a token (--http-token or "
                    "EVENKEEL_PAGE_TOKEN)",
                    o.listen));
  }
  std::unique_ptr<LivePage> page(new LivePage());
  page->impl_ = std::make_unique<Impl>();
  Impl* impl = page->impl_.get();
  impl->o = o;
  std::vector<report::RankInfo> ranks;
  for (size_t h = 0; h < o.hosts.size(); ++h) {
    for (int g = 0; g < o.gpus_per_node; ++g)
      ranks.push_back({static_cast<int>(h) * o.gpus_per_node + g, o.hosts[h], g});
  }
  impl->rec = std::make_unique<report::Recorder>(ranks);
  impl->rec->run = o.run;
  impl->server.SetFilter(
      [impl](const net::HttpServer::Request& req) -> std::optional<net::HttpServer::Response> {
        if (impl->o.token.empty()) return std::nullopt;
        std::string auth = req.Header("Authorization");
        std::string given = auth.starts_with("Bearer ") ? auth.substr(7) : req.QueryParam("token");
        if (net::ConstantTimeEquals(given, impl->o.token)) return std::nullopt;
        auto res = net::HttpServer::Response::Text(401, "unauthorized\n");
        res.headers.emplace_back("WWW-Authenticate", "Bearer");
        return res;
      });
  impl->server.Get("/", [impl](const net::HttpServer::Request&) {
    net::HttpServer::Response res;
    {
      std::lock_guard<std::mutex> lock(impl->mu);
      impl->Refresh();
      if (impl->html_model != impl->model) {  // built on demand: the page polls /data.json, not /
        impl->html = std::make_shared<const std::string>(report::AssembleHtml(*impl->model));
        impl->html_model = impl->model;
      }
      res.shared_body = impl->html;
    }
    res.content_type = "text/html; charset=utf-8";
    res.headers.emplace_back("Cache-Control", "no-store");
    return res;
  });
  impl->server.Get("/data.json", [impl](const net::HttpServer::Request&) {
    net::HttpServer::Response res;
    {
      std::lock_guard<std::mutex> lock(impl->mu);
      impl->Refresh();
      res.shared_body = impl->model;
    }
    res.content_type = "application/json";
    res.headers.emplace_back("Cache-Control", "no-store");
    return res;
  });
  auto bound = impl->server.Bind(o.listen);
  if (!bound.ok()) return bound.status().WithContext("watch --http");
  page->port_ = *bound;
  impl->thread = std::thread([impl] { (void)impl->server.Serve(); });
  return page;
}

LivePage::~LivePage() {
  if (impl_) {
    impl_->server.Stop();
    if (impl_->thread.joinable()) impl_->thread.join();
  }
}

void LivePage::OnRound(double now, const std::vector<AgentPoll>& polls,
                       const triage::Assessment& assessment,
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

void LivePage::Impl::Refresh() {
  double now = o.clock->Monotonic();
  if (model && now - cached_at < o.poll_s) return;
  report::ModelOptions mo;
  mo.live = true;
  mo.poll_s = o.poll_s;
  mo.interval_s = o.poll_s;
  rec->notes.clear();
  if (rec->readings() == 0) rec->notes.push_back("no GPU readings from the agents yet");
  model = std::make_shared<const std::string>(rec->ToJson(mo));
  cached_at = now;
}

std::string LivePage::ModelJson() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->Refresh();
  return *impl_->model;
}

}  // namespace ek::watch
