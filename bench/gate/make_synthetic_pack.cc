// Writes a synthetic pack (rank files + manifest) of the report's size for the
// gate benchmark: W ranks x B blocks x S tokens, ids uniform below a vocab size.
//   make_synthetic_pack DIR [--world 16] [--blocks 30849] [--seq 2048] [--vocab 151669]
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/version.h"
#include "packfile/manifest.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: make_synthetic_pack DIR [--world W] [--blocks B] [--seq S] [--vocab V]\n");
    return 2;
  }
  std::string dir = argv[1];
  int world = 16, seq = 2048;
  uint64_t blocks = 30849;
  int64_t vocab = 151669;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--world")
      world = std::stoi(argv[i + 1]);
    else if (k == "--blocks")
      blocks = std::stoull(argv[i + 1]);
    else if (k == "--seq")
      seq = std::stoi(argv[i + 1]);
    else if (k == "--vocab")
      vocab = std::stoll(argv[i + 1]);
  }
  if (!ek::MakeDirs(dir).ok()) return 1;
  ek::pack::Manifest m;
  m.evenkeel_version = ek::kVersion;
  m.tokenizer_path = "synthetic";
  m.vocab_size = vocab;
  m.seq_len = seq;
  m.world = world;
  m.eos_token = "<eos>";
  std::vector<int32_t> block(static_cast<size_t>(seq));
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int r = 0; r < world; ++r) {
    ek::pack::RankInfo info;
    info.rank = r;
    info.file = ek::pack::RankFileName(r);
    info.blocks = blocks - (r == 3 ? 14 : 0);  // one short rank, as in the report
    info.bytes = info.blocks * seq * 4;
    info.tokens = info.blocks * seq;
    auto f = ek::AtomicFile::Create(dir + "/" + info.file);
    if (!f.ok()) return 1;
    XXH3_state_t* st = XXH3_createState();
    XXH3_64bits_reset(st);
    for (uint64_t b = 0; b < info.blocks; ++b) {
      for (auto& t : block) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
      }
      std::string_view bytes(reinterpret_cast<const char*>(block.data()), block.size() * 4);
      XXH3_64bits_update(st, bytes.data(), bytes.size());
      if (!f->Write(bytes).ok()) return 1;
    }
    info.xxh3 = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    if (!f->Commit().ok()) return 1;
    m.ranks.push_back(info);
    m.total_tokens += info.tokens;
  }
  if (!ek::pack::WriteManifest(dir, m).ok()) return 1;
  std::printf("wrote %d ranks x %llu blocks x %d tokens to %s\n", world,
              static_cast<unsigned long long>(blocks), seq, dir.c_str());
  return 0;
}
