// The watcher's state file (watch/watcher.cc: Watcher::Load, which hands the
// "detectors" member to Detectors::LoadJson): the input is written as
// STATE_DIR/state.json and a watcher is created over it. The detectors' own
// state is also loaded directly, saved, and evaluated once.
#include <unistd.h>

#include "fuzz/fuzz_util.h"
#include "triage/profile.h"
#include "watch/detectors.h"
#include "watch/watcher.h"

using namespace ek;

namespace {
class FixedClock : public telemetry::Clock {
 public:
  double Now() override { return 2000; }
  double Monotonic() override { return 2000; }
  void SleepFor(double) override {}
  void SleepUntil(double) override {}
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = fuzz::Bytes(data, size);
  watch::WatchSettings settings;
  settings.run = "run";
  {
    watch::Detectors d(settings, triage::B300Profile());
    if (d.LoadJson(in).ok()) {
      (void)d.SaveJson();
      (void)d.Evaluate(2000, {});
    }
  }
  std::string path = fuzz::ScratchDir() + "/state.json";
  fuzz::WriteWhole(path, in);
  watch::WatcherOptions options;
  options.settings = settings;
  options.profile = triage::B300Profile();
  options.agents = {"127.0.0.1:1"};
  options.state_dir = fuzz::ScratchDir();
  static FixedClock clock;
  auto w = watch::Watcher::Create(std::move(options), {}, nullptr, &clock, nullptr);
  if (w.ok()) (void)(*w)->open_incidents().size();
  ::unlink(path.c_str());
  return 0;
}
