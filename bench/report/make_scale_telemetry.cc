// Writes the report's scale case: nvidia-smi CSV (csv,nounits with a header), one
// file per host, HOSTS x GPUS ranks sampled once a second for SECONDS, with the
// field report's B300 numbers: healthy ~990 W at 100% with noise; rank 700 at 0%
// for exactly two samples at 3 h (a blip the widest zoom must still show); from
// 5 h 50 min, the deadlock: rank 3 at 0% and every other rank pinned at 100% with
// power floored at ~190 W. Deterministic (fixed seed).
//
//   make_scale_telemetry OUT_DIR [HOSTS=128] [GPUS=8] [SECONDS=21600]
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_scale_telemetry OUT_DIR [HOSTS] [GPUS] [SECONDS]\n");
    return 2;
  }
  std::string out = argv[1];
  int hosts = argc > 2 ? std::atoi(argv[2]) : 128;
  int gpus = argc > 3 ? std::atoi(argv[3]) : 8;
  int seconds = argc > 4 ? std::atoi(argv[4]) : 21600;
  ::mkdir(out.c_str(), 0755);
  const long t0 = 1796040000;  // 2026-11-30 (UTC), any fixed time
  const int blip_rank = 700 < hosts * gpus ? 700 : hosts * gpus - 1;
  const int blip_t = seconds / 2;
  const int deadlock_t = seconds - 600;
  std::vector<char> buf(1 << 20);
  for (int h = 0; h < hosts; ++h) {
    char name[64];
    std::snprintf(name, sizeof name, "%s/node-%03d.csv", out.c_str(), h);
    std::string tmp = std::string(name) + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) {
      std::perror(name);
      return 1;
    }
    std::setvbuf(f, buf.data(), _IOFBF, buf.size());
    std::fputs("timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]\n", f);
    std::mt19937 rng(1234 + h);
    std::normal_distribution<double> noise(0, 12);
    for (int t = 0; t < seconds; ++t) {
      long ts = t0 + t;
      long sec = ts % 60, min = (ts / 60) % 60, hour = (ts / 3600) % 24, day = 30;
      char stamp[32];
      std::snprintf(stamp, sizeof stamp, "2026/11/%02ld %02ld:%02ld:%02ld.%03d", day, hour, min,
                    sec, h % 1000);
      for (int g = 0; g < gpus; ++g) {
        int rank = h * gpus + g;
        int util = 100;
        double power = 990 + noise(rng);
        if (t >= deadlock_t) {
          util = rank == 3 ? 0 : 100;
          power = 190 + noise(rng) / 4;
        } else if (rank == blip_rank && (t == blip_t || t == blip_t + 1)) {
          util = 0;
        }
        std::fprintf(f, "%s, %d, %d %%, %.2f W, 83968 MiB\n", stamp, g, util, power);
      }
    }
    std::fclose(f);
    std::rename(tmp.c_str(), name);
  }
  std::printf(
      "%d hosts x %d GPUs x %d s -> %s (blip: rank %d at t=%d..%d; deadlock: rank 3 from t=%d)\n",
      hosts, gpus, seconds, out.c_str(), blip_rank, blip_t, blip_t + 1, deadlock_t);
  return 0;
}
