#include "triage/profile.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/file.h"
#include "core/json_fields.h"
#include "core/json_out.h"

namespace ek::triage {

namespace {

constexpr double kB300LimitW = 1100;
constexpr std::string_view kFormat = "evenkeel-triage-profile/1";

std::string Upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

}  // namespace

Status Profile::Validate() const {
  bool ordered = floor_w > 0 && floor_w < starvation_w && starvation_w <= communication_w &&
                 communication_w < healthy_lo_w && healthy_lo_w <= healthy_hi_w &&
                 healthy_hi_w < 5000 && idle_w >= 0;
  if (!ordered) {
    return InvalidArgumentError(fmt::format(
        "profile {}: bands must be ordered floor < starvation <= communication < healthy_lo <= "
        "healthy_hi (got {} < {} <= {} < {} <= {} W)",
        name, floor_w, starvation_w, communication_w, healthy_lo_w, healthy_hi_w));
  }
  return Status::Ok();
}

Profile B300Profile() {
  Profile p;
  p.name = "B300";
  p.origin = "field report (16x B300, Qwen3-32B FSDP full fine-tune)";
  p.power_limit_w = kB300LimitW;
  p.healthy_lo_w = 940;
  p.healthy_hi_w = 1040;
  p.communication_w = 640;
  p.starvation_w = 575;
  p.floor_w = 190;
  return p;
}

Profile ProfileFromPowerLimit(std::string name, double power_limit_w) {
  Profile b = B300Profile();
  double k = power_limit_w / kB300LimitW;
  Profile p;
  p.name = std::move(name);
  p.origin = fmt::format("B300 bands scaled to a {:.0f} W power limit (x{:.3f})", power_limit_w, k);
  p.power_limit_w = power_limit_w;
  p.healthy_lo_w = b.healthy_lo_w * k;
  p.healthy_hi_w = b.healthy_hi_w * k;
  p.communication_w = b.communication_w * k;
  p.starvation_w = b.starvation_w * k;
  p.floor_w = b.floor_w * k;
  return p;
}

Profile ProfileFromBands(std::string name, double healthy_lo_w, double healthy_hi_w,
                         double floor_w) {
  Profile b = B300Profile();
  double b_mid = (b.healthy_lo_w + b.healthy_hi_w) / 2;
  double comm_frac = (b.communication_w - b.floor_w) / (b_mid - b.floor_w);
  double starve_frac = (b.starvation_w - b.floor_w) / (b_mid - b.floor_w);
  double mid = (healthy_lo_w + healthy_hi_w) / 2;
  Profile p;
  p.name = std::move(name);
  p.healthy_lo_w = healthy_lo_w;
  p.healthy_hi_w = healthy_hi_w;
  p.floor_w = floor_w;
  p.communication_w = floor_w + comm_frac * (mid - floor_w);
  p.starvation_w = floor_w + starve_frac * (mid - floor_w);
  return p;
}

std::vector<std::string> BuiltinProfileNames() { return {"B300", "H100", "H200", "A100"}; }

Result<Profile> BuiltinProfile(std::string_view name) {
  std::string u = Upper(name);
  if (u == "B300") return B300Profile();
  // SXM board power limits from NVIDIA's data sheets.
  if (u == "H100") return ProfileFromPowerLimit("H100", 700);
  if (u == "H200") return ProfileFromPowerLimit("H200", 700);
  if (u == "A100") return ProfileFromPowerLimit("A100", 400);
  if (u.rfind("LIMIT:", 0) == 0) {
    double w = 0;
    std::string_view num = std::string_view(u).substr(6);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), w);
    if (ec != std::errc() || p != num.data() + num.size() || !(w >= 50 && w <= 3000)) {
      return InvalidArgumentError(fmt::format("profile {}: limit must be 50..3000 W", name));
    }
    return ProfileFromPowerLimit(fmt::format("limit:{}", num), w);
  }
  return NotFoundError(
      fmt::format("no built-in profile '{}' (have B300, H100, H200, A100, limit:WATTS)", name));
}

Result<Profile> LoadProfile(const std::string& name_or_path) {
  Result<Profile> builtin = BuiltinProfile(name_or_path);
  if (builtin.ok() || !FileExists(name_or_path)) return builtin;
  EK_ASSIGN_OR_RETURN(std::string text, ReadFile(name_or_path));
  return ParseProfileJson(text, name_or_path);
}

Result<Profile> ParseProfileJson(std::string_view json, std::string_view where) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(json.data(), json.size()).get(root)) {
    return CorruptError(fmt::format("{}: not valid JSON", where));
  }
  EK_ASSIGN_OR_RETURN(JsonFields f, JsonFields::Root(root, std::string(where)));
  std::string format;
  if (!f.Str("format", &format).ok() || format != kFormat) {
    return f.Err("format",
                 fmt::format("not a triage profile (\"format\" must be \"{}\")", kFormat));
  }
  Profile p;
  EK_RETURN_IF_ERROR(f.OptStr("name", &p.name));
  EK_RETURN_IF_ERROR(f.OptStr("origin", &p.origin));
  EK_RETURN_IF_ERROR(f.OptNum("power_limit_w", &p.power_limit_w));
  EK_RETURN_IF_ERROR(f.Num("healthy_lo_w", &p.healthy_lo_w));
  EK_RETURN_IF_ERROR(f.Num("healthy_hi_w", &p.healthy_hi_w));
  EK_RETURN_IF_ERROR(f.Num("communication_w", &p.communication_w));
  EK_RETURN_IF_ERROR(f.Num("starvation_w", &p.starvation_w));
  EK_RETURN_IF_ERROR(f.Num("floor_w", &p.floor_w));
  EK_RETURN_IF_ERROR(f.OptNum("idle_w", &p.idle_w));
  Status valid = p.Validate();
  if (!valid.ok()) return valid.WithContext(where);
  return p;
}

// One field a line (docs/triage_profile_format.md): a file people read, diff and edit.
std::string ProfileToJson(const Profile& p) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject(JsonWriter::kLines)
      .Key("format")
      .Str(kFormat)
      .Key("name")
      .Str(p.name)
      .Key("origin")
      .Str(p.origin);
  auto field = [&](const char* key, double v) { w.Key(key).Fixed(v, 1); };
  if (p.power_limit_w > 0) field("power_limit_w", p.power_limit_w);
  field("healthy_lo_w", p.healthy_lo_w);
  field("healthy_hi_w", p.healthy_hi_w);
  field("communication_w", p.communication_w);
  field("starvation_w", p.starvation_w);
  field("floor_w", p.floor_w);
  if (p.idle_w > 0) field("idle_w", p.idle_w);
  w.EndObject();
  return w.Line();
}

}  // namespace ek::triage
