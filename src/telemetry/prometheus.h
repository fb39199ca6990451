// dcgm-exporter's Prometheus text exposition, scraped over HTTP from many
// nodes at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "net/http_client.h"
#include "telemetry/sample.h"

namespace ek::telemetry {

// Parses one scrape of dcgm-exporter into one sample per `gpu` label, stamped
// `time` on `host`. Reads DCGM_FI_DEV_POWER_USAGE (W), DCGM_FI_DEV_GPU_UTIL
// (%), DCGM_FI_DEV_FB_USED (MiB), DCGM_FI_PROF_SM_ACTIVE (ratio) and
// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ) when present; other series are
// ignored. NaN is missing; malformed lines and series without a gpu label are
// problems (at `where`:line). Follows the text format 0.0.4 grammar: labels
// with \\, \" and \n escapes, optional trailing comma, optional timestamp.
std::vector<Sample> ParseDcgmExposition(std::string_view text, std::string_view host, double time,
                                        std::string_view where, std::vector<Problem>* problems);

// "node-a:9400" -> "http://node-a:9400/metrics"; a URL with a path is kept.
std::string NormalizeMetricsUrl(std::string_view url);

// Scrapes in flight at once (the core thread pool's size); a scrape waits at
// most its timeout, so a round of 128 nodes takes at most 128 / 32 timeouts.
inline constexpr size_t kScrapeThreads = 32;

class PrometheusSource : public Source {
 public:
  // Hosts are the URLs' host names in the order given (host:port where two
  // URLs share a host name, host:port/path where they share that too). The
  // same URL twice is an error. `http` (the one client, net/http_client.h) and
  // `clock` must outlive the source.
  static Result<std::unique_ptr<PrometheusSource>> Create(const std::vector<std::string>& urls,
                                                          net::HttpClient* http, Clock* clock);
  // Scrapes every URL once, in parallel, each with the time left until
  // `deadline` (at least 0.2 s). A node that does not answer is a problem and
  // contributes no samples (its ranks go stale).
  Status Poll(double deadline, Batch* out) override;
  std::vector<std::string> hosts() const override { return hosts_; }
  bool live() const override { return true; }

 private:
  PrometheusSource(net::HttpClient* http, Clock* clock) : http_(http), clock_(clock) {}
  std::vector<std::string> urls_;
  std::vector<std::string> hosts_;
  net::HttpClient* http_;
  Clock* clock_;
  std::unique_ptr<ThreadPool> pool_;  // created at the first poll
};

}  // namespace ek::telemetry
