// Alert sinks: Alertmanager (API v2), a JSON webhook (Slack-compatible
// "text"), and a command. A sink renders an incident into the body it sends
// (rendered once, when the notice is queued, and kept in the spool) and
// delivers a body; delivery is retried by the watcher's outbox (watcher.h).
#pragma once

#include <memory>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "net/http_client.h"
#include "watch/detectors.h"

namespace ek::watch {

// The one client (net/http_client.h), under the names the watcher's code uses.
using net::HttpClient;
using net::HttpResponse;
using net::MakeHttpClient;

// An incident as sinks see it: the finding that opened it (kept up to date
// while it is open), its identity and its times.
struct Incident {
  std::string id;  // "<run>/<key>/<opened ms>": unique per incident
  Finding finding;
  double opened = 0;       // watcher clock when it was opened
  double resolved = 0;     // 0 while open
  double last_resent = 0;  // last Alertmanager re-post of a firing alert
  int clear_rounds = 0;    // consecutive rounds the condition was absent
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual std::string name() const = 0;  // "alertmanager", "webhook", "command"
  // Whether the sink wants firing alerts re-posted while open (Alertmanager
  // resolves an alert it has not heard of for resolve_timeout).
  virtual bool wants_resend() const { return false; }
  virtual std::string Render(const Incident& incident, const std::string& run,
                             bool resolved) const = 0;
  virtual Status Deliver(const std::string& body) = 0;
};

// POST {url}/api/v2/alerts. Labels: alertname (EvenkeelHang, ...), run,
// kind, severity, incident. Firing alerts carry no endsAt; resolved ones do.
std::unique_ptr<Sink> MakeAlertmanagerSink(const std::string& url, HttpClient* http,
                                           double timeout_s);
// POST url, {"text": "...", "evenkeel": {...}}.
std::unique_ptr<Sink> MakeWebhookSink(const std::string& url, HttpClient* http, double timeout_s);
// /bin/sh -c command, the JSON on stdin and EVENKEEL_ALERT_STATUS,
// EVENKEEL_ALERT_KIND, EVENKEEL_ALERT_ID in its environment; exit 0 is delivered.
// One still running after `timeout_s` on `clock` is killed, with its group.
std::unique_ptr<Sink> MakeCommandSink(const std::string& command, double timeout_s,
                                      Clock* clock = Clock::Default());

// The incident as a JSON object (the webhook's "evenkeel" field, the command's stdin).
std::string IncidentJson(const Incident& incident, const std::string& run, bool resolved);
// One line for people: "[FIRING] run: hang: ... ranks 0-15 on node-a,node-b since ...".
std::string IncidentText(const Incident& incident, const std::string& run, bool resolved);
// "2026-11-29T14:03:01.123Z"
std::string Rfc3339(double t);

}  // namespace ek::watch
