// run.toml (run/run_file.h: ParseRunFile, which validates), then what every
// reader of a run file derives from it: its JSON form (the Python RunFile),
// the paths it resolves and the rank topology.
#include "fuzz/fuzz_util.h"
#include "run/run_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto run = ek::run::ParseRunFile(ek::fuzz::Bytes(data, size), "fuzz/run.toml");
  if (!run.ok()) return 0;
  const ek::run::RunFile& r = *run;
  (void)ek::run::RunFileToJson(r);
  (void)r.ConfigPath();
  (void)r.Identity();
  (void)r.Resolve(r.pack_dir);
  ek::run::Topology t = r.topology();
  for (int rank : {0, 1, t.world() - 1, t.world()}) {
    int node = t.NodeOf(rank);
    (void)t.LocalRank(rank);
    (void)t.HostOf(node);
    (void)t.RanksOf(node);
  }
  (void)t.NodeOfHost("node-0");
  return 0;
}
