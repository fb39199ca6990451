#include "heartbeat/goodput_account.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace ek::heartbeat {

void PutGoodput(const GoodputAccount& g, JsonWriter* w) {
  w->BeginObject().Key("ratio").Fixed(g.Ratio(), 6).Key("wall_s").Fixed(g.wall_s, 3);
  w->Key("training_s").Fixed(g.training_s, 3).Key("redone_s").Fixed(g.redone_s, 3);
  w->Key("restart_s").BeginObject().Key("detection").Fixed(g.detection_s, 3);
  w->Key("stopping").Fixed(g.stopping_s, 3).Key("rendezvous").Fixed(g.rendezvous_s, 3);
  w->Key("startup").Fixed(g.startup_s, 3).EndObject();
  w->Key("save_blocked_s").Fixed(g.save_blocked_s, 3).Key("other_s").Fixed(g.other_s, 3);
  w->EndObject();
}

std::string GoodputToJson(const GoodputAccount& g) {
  JsonWriter w;
  PutGoodput(g, &w);
  return w.str();
}

namespace {

Status GoodputPart(const JsonFields& f, std::string_view key, double* out) {
  EK_RETURN_IF_ERROR(f.Num(key, out));
  if (!(*out >= 0)) return f.Err(key, fmt::format("{} is negative", *out));
  return Status::Ok();
}

}  // namespace

Status GoodputFromFields(const JsonFields& f, std::string_view key, GoodputAccount* out) {
  JsonFields g = f, r = f;
  EK_RETURN_IF_ERROR(f.Object(key, &g));
  GoodputAccount a;
  double ratio = 0;
  for (auto [k, v] : {std::pair{"ratio", &ratio},
                      {"wall_s", &a.wall_s},
                      {"training_s", &a.training_s},
                      {"redone_s", &a.redone_s},
                      {"save_blocked_s", &a.save_blocked_s},
                      {"other_s", &a.other_s}}) {
    EK_RETURN_IF_ERROR(GoodputPart(g, k, v));
  }
  if (ratio > 1) return g.Err("ratio", fmt::format("{} is above 1", ratio));
  EK_RETURN_IF_ERROR(g.Object("restart_s", &r));
  for (auto [k, v] : {std::pair{"detection", &a.detection_s},
                      {"stopping", &a.stopping_s},
                      {"rendezvous", &a.rendezvous_s},
                      {"startup", &a.startup_s}}) {
    EK_RETURN_IF_ERROR(GoodputPart(r, k, v));
  }
  *out = a;
  return Status::Ok();
}

std::string GoodputFileToJson(const GoodputFile& f) {
  JsonWriter w;
  w.BeginObject().Key("v").Int(1).Key("run_id").Str(f.run_id).Key("time").Fixed(f.time, 3);
  w.Key("attempt").Int(f.attempt).Key("running").Bool(f.running).Key("goodput");
  PutGoodput(f.goodput, &w);
  w.EndObject();
  return w.Line();
}

Result<GoodputFile> ParseGoodputFile(std::string_view text, const std::string& where) {
  JsonDocument doc;
  EK_ASSIGN_OR_RETURN(JsonFields f, doc.Parse(text, where));
  GoodputFile out;
  int64_t v = 0;
  EK_RETURN_IF_ERROR(f.Int("v", &v));
  if (v != 1) return f.Err("v", fmt::format("unknown goodput version {}", v));
  EK_RETURN_IF_ERROR(f.Str("run_id", &out.run_id));
  EK_RETURN_IF_ERROR(f.Num("time", &out.time));
  EK_RETURN_IF_ERROR(f.IntIn("attempt", 0, 1 << 30, &out.attempt));
  EK_RETURN_IF_ERROR(f.Bool("running", &out.running));
  EK_RETURN_IF_ERROR(GoodputFromFields(f, "goodput", &out.goodput));
  return out;
}

std::string ShortDuration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) s = 0;
  if (s < 10) return fmt::format("{:.1f}s", s);
  auto total = static_cast<long long>(std::llround(s));
  if (total < 60) return fmt::format("{}s", total);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
}

std::string GoodputLine(const GoodputAccount& g) {
  return fmt::format(
      "goodput {:.1f}% (training {} of {}; redone {}, restart {}, saves blocked {}, other {})",
      100 * g.Ratio(), ShortDuration(g.training_s), ShortDuration(g.wall_s),
      ShortDuration(g.redone_s), ShortDuration(g.RestartS()), ShortDuration(g.save_blocked_s),
      ShortDuration(g.other_s));
}

}  // namespace ek::heartbeat
