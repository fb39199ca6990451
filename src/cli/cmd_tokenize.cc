// evenkeel tokenize / detokenize: JSON lines in, JSON lines out, in order.
#include <fmt/core.h>
#include <simdjson.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_out.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

namespace ek::cli {

namespace {

struct LineResult {
  std::string out;
  Status error;  // first error in the task
  uint64_t tokens = 0, records = 0, bytes = 0, replaced = 0;
};

// Splits a chunk into lines (without '\n'), recording 1-based line numbers.
void SplitLines(std::string_view chunk, std::vector<std::string_view>* lines) {
  lines->clear();
  LineSplitter split(chunk);
  for (TextLine line; split.Next(&line);) lines->push_back(line.text);
}

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

std::string DescribeJsonError(std::string_view line, simdjson::error_code err) {
  std::string where = LocateJsonError(line);
  if (where.empty()) return simdjson::error_message(err);
  return where;
}

// Per-worker parsing state.
struct Worker {
  simdjson::ondemand::parser parser;
  std::string padded;
  std::string fixed;
  std::vector<int32_t> ids;
};

using LineFn = Status (*)(const void* ctx, std::string_view line, Worker& w, LineResult& r);

struct TokenizeCtx {
  const tokenize::Tokenizer* tok;
  std::string field;
  InvalidUtf8Policy policy;
};

Status TokenizeLine(const void* vctx, std::string_view line, Worker& w, LineResult& r) {
  const auto* ctx = static_cast<const TokenizeCtx*>(vctx);
  size_t replaced = 0;
  EK_RETURN_IF_ERROR(SanitizeJsonLine(&line, ctx->policy, &w.fixed, &replaced));
  r.replaced += replaced;
  w.padded.assign(line);
  w.padded.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
  simdjson::ondemand::document doc;
  auto err = w.parser.iterate(w.padded.data(), line.size(), w.padded.size()).get(doc);
  simdjson::ondemand::object obj;
  if (!err) err = doc.get_object().get(obj);
  if (err) return InvalidArgumentError("malformed JSON: " + DescribeJsonError(line, err));
  std::string_view text;
  auto field = obj.find_field_unordered(ctx->field);
  if (field.error() == simdjson::NO_SUCH_FIELD) {
    return InvalidArgumentError(fmt::format("no \"{}\" field", ctx->field));
  }
  if (auto e = field.get_string().get(text); e) {
    if (e == simdjson::INCORRECT_TYPE) {
      return InvalidArgumentError(fmt::format("\"{}\" is not a string", ctx->field));
    }
    return InvalidArgumentError("malformed JSON: " + DescribeJsonError(line, e));
  }
  w.ids.clear();
  EK_RETURN_IF_ERROR(ctx->tok->Encode(text, &w.ids));
  r.out.append("{\"ids\":");
  AppendIntArray(&r.out, w.ids.data(), w.ids.size());
  r.out.append("}\n");
  r.tokens += w.ids.size();
  r.bytes += text.size();
  return Status::Ok();
}

struct DetokenizeCtx {
  const tokenize::Tokenizer* tok;
};

Status DetokenizeLine(const void* vctx, std::string_view line, Worker& w, LineResult& r) {
  const auto* ctx = static_cast<const DetokenizeCtx*>(vctx);
  w.padded.assign(line);
  w.padded.resize(line.size() + simdjson::SIMDJSON_PADDING, ' ');
  simdjson::ondemand::document doc;
  auto err = w.parser.iterate(w.padded.data(), line.size(), w.padded.size()).get(doc);
  simdjson::ondemand::array arr;
  if (!err) err = doc["ids"].get_array().get(arr);
  if (err) {
    if (err == simdjson::NO_SUCH_FIELD) return InvalidArgumentError("no \"ids\" field");
    return InvalidArgumentError("malformed JSON or \"ids\" not an array: " +
                                DescribeJsonError(line, err));
  }
  w.ids.clear();
  for (auto v : arr) {
    int64_t id;
    if (v.get_int64().get(id) || id < INT32_MIN || id > INT32_MAX) {
      return InvalidArgumentError("\"ids\" holds a value that is not a 32-bit integer");
    }
    w.ids.push_back(static_cast<int32_t>(id));
  }
  std::string bytes;
  EK_RETURN_IF_ERROR(ctx->tok->Decode(w.ids, &bytes));
  std::string text;
  r.replaced += tokenize::ReplaceInvalidUtf8(bytes, &text);  // HF decodes lossily too
  r.out.append("{\"text\":");
  AppendJsonString(&r.out, text);
  r.out.append("}\n");
  r.tokens += w.ids.size();
  r.bytes += text.size();
  return Status::Ok();
}

struct Totals {
  uint64_t records = 0, tokens = 0, bytes = 0, replaced = 0;
};

// Runs `fn` over every line of every input on the pool; output in input order.
Status ProcessInputs(const std::vector<std::string>& inputs, ThreadPool& pool, LineFn fn,
                     const void* ctx, const std::function<Status(std::string_view)>& out,
                     Totals* totals, Progress* progress) {
  std::vector<Worker> workers(pool.size());
  std::vector<std::string_view> lines;
  for (const std::string& input : inputs) {
    EK_ASSIGN_OR_RETURN(auto reader, LineChunkReader::Open(input));
    uint64_t line_base = 0;  // lines before this chunk
    std::string_view chunk;
    while (true) {
      EK_ASSIGN_OR_RETURN(bool more, reader->Next(&chunk));
      if (!more) break;
      SplitLines(chunk, &lines);
      size_t tasks = std::min<size_t>(lines.size(), pool.size() * 16);
      std::vector<LineResult> results(tasks);
      std::vector<uint64_t> first_bad(tasks, UINT64_MAX);
      pool.ParallelFor(tasks, [&](size_t task, size_t wi) {
        size_t lo = lines.size() * task / tasks, hi = lines.size() * (task + 1) / tasks;
        LineResult& r = results[task];
        for (size_t i = lo; i < hi; ++i) {
          if (IsBlank(lines[i])) continue;
          Status st = fn(ctx, lines[i], workers[wi], r);
          if (!st.ok()) {
            r.error = st;
            first_bad[task] = i;
            return;
          }
          ++r.records;
        }
      });
      for (size_t t = 0; t < tasks; ++t) {
        LineResult& r = results[t];
        if (!r.out.empty()) EK_RETURN_IF_ERROR(out(r.out));
        totals->records += r.records;
        totals->tokens += r.tokens;
        totals->bytes += r.bytes;
        totals->replaced += r.replaced;
        if (!r.error.ok()) {
          return r.error.WithContext(
              fmt::format("{}:{}", reader->path(), line_base + first_bad[t] + 1));
        }
      }
      line_base += lines.size();
      progress->Update(reader->consumed_bytes() >> 20, reader->total_bytes() >> 20,
                       fmt::format("MiB, {} records, {} tokens", totals->records, totals->tokens));
    }
  }
  progress->Finish();
  return Status::Ok();
}

struct CommonFlags {
  std::string tokenizer;
  std::vector<std::string> inputs;
  size_t threads = 0;
  std::string output;
  bool stats = false;
};

int RunLines(CLI::App& app, int argc, char** argv, CommonFlags& f, LineFn fn, void* ctx,
             const tokenize::Tokenizer** tok_slot, std::unique_ptr<tokenize::Tokenizer>* owned,
             const char* label) {
  auto t0 = std::chrono::steady_clock::now();
  auto tok = tokenize::Tokenizer::FromFile(f.tokenizer);
  if (!tok.ok()) return ReportError(tok.status());
  *owned = std::move(tok).value();
  *tok_slot = owned->get();
  auto t1 = std::chrono::steady_clock::now();
  if (f.inputs.empty()) f.inputs.push_back("-");
  ThreadPool pool(f.threads);
  std::unique_ptr<AtomicFile> out_file;
  if (!f.output.empty() && f.output != "-") {
    auto af = AtomicFile::Create(f.output);
    if (!af.ok()) return ReportError(af.status());
    out_file = std::make_unique<AtomicFile>(std::move(af).value());
  }
  Totals totals;
  Progress progress(label);
  Status st;
  if (out_file) {
    auto out = [&](std::string_view data) { return out_file->Write(data); };
    st = ProcessInputs(f.inputs, pool, fn, ctx, out, &totals, &progress);
    if (st.ok()) st = out_file->Commit();
  } else {
    auto out = [](std::string_view data) { return WriteAll(STDOUT_FILENO, data, "<stdout>"); };
    st = ProcessInputs(f.inputs, pool, fn, ctx, out, &totals, &progress);
  }
  if (!st.ok()) return ReportError(st);
  auto t2 = std::chrono::steady_clock::now();
  if (totals.replaced > 0) {
    Warn(fmt::format("replaced {} invalid UTF-8 sequence(s) with U+FFFD", totals.replaced));
  }
  if (f.stats) {
    double load = std::chrono::duration<double>(t1 - t0).count();
    double secs = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr,
                 "evenkeel: %s: %llu records, %.1f MB, %llu tokens in %.3f s on %zu threads: "
                 "%.2f MB/s, %.0f tokens/s (tokenizer load %.3f s)\n",
                 label, static_cast<unsigned long long>(totals.records), totals.bytes / 1e6,
                 static_cast<unsigned long long>(totals.tokens), secs, pool.size(),
                 totals.bytes / 1e6 / secs, totals.tokens / secs, load);
  }
  (void)app;
  (void)argc;
  (void)argv;
  return kExitOk;
}

void AddCommon(CLI::App& app, CommonFlags& f) {
  app.add_option("--tokenizer", f.tokenizer, "path to a Hugging Face tokenizer.json")->required();
  app.add_option("inputs", f.inputs, "JSON lines files ('-' or none: stdin)");
  app.add_option("--threads", f.threads, "worker threads (default: all cores)");
  app.add_option("-o,--output", f.output, "write here (atomically) instead of stdout");
  app.add_flag("--stats", f.stats, "print throughput to stderr at the end");
}

}  // namespace

int RunTokenize(int argc, char** argv) {
  CLI::App app{
      "Encode JSON lines {\"text\": ...} into {\"ids\": [...]}, one line per input, in order.\n"
      "Ids equal Hugging Face tokenizers' encode(text, add_special_tokens=False).",
      "evenkeel tokenize"};
  CommonFlags f;
  AddCommon(app, f);
  TokenizeCtx ctx;
  ctx.field = "text";
  std::string invalid = "error";
  app.add_option("--text-field", ctx.field, "the field that holds the text")->capture_default_str();
  app.add_option("--invalid-utf8", invalid,
                 "error: refuse the line; replace: U+FFFD per bad sequence")
      ->check(CLI::IsMember({"error", "replace"}))
      ->capture_default_str();
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  ctx.policy = invalid == "replace" ? InvalidUtf8Policy::kReplace : InvalidUtf8Policy::kError;
  std::unique_ptr<tokenize::Tokenizer> owned;
  return RunLines(app, argc, argv, f, TokenizeLine, &ctx, &ctx.tok, &owned, "tokenize");
}

int RunDetokenize(int argc, char** argv) {
  CLI::App app{
      "Decode JSON lines {\"ids\": [...]} into {\"text\": ...}, one line per input, in order.\n"
      "Byte sequences that are not valid UTF-8 become U+FFFD, as Hugging Face's decode does.",
      "evenkeel detokenize"};
  CommonFlags f;
  AddCommon(app, f);
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  DetokenizeCtx ctx;
  std::unique_ptr<tokenize::Tokenizer> owned;
  return RunLines(app, argc, argv, f, DetokenizeLine, &ctx, &ctx.tok, &owned, "detokenize");
}

}  // namespace ek::cli
