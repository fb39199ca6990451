// evenkeel pack / pack merge / inspect.
#include <fmt/core.h>
#include <glob.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/json_out.h"
#include "core/parse.h"
#include "core/progress.h"
#include "ingest/source.h"
#include "pack/packer.h"
#include "packfile/inspect.h"
#include "packfile/layout.h"
#include "packfile/manifest.h"
#include "run/pack_sources.h"
#include "run/run_file.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

namespace ek::cli {

namespace {

// The sources table: what each source was asked for and what it gave. A pack from
// flags alone has one source of every input; its table is shown only with --json.
void PrintSources(const pack::Manifest& m) {
  if (m.sources.size() < 2 && (m.sources.empty() || m.sources[0].weight == 0) &&
      (m.sources.empty() || m.sources[0].epochs <= 1))
    return;
  std::printf("%-20s %8s %7s %10s %12s %8s %9s\n", "source", "weight", "passes", "records",
              "tokens", "target", "realized");
  for (const auto& src : m.sources) {
    const std::string weight =
        src.weight > 0 ? fmt::format("{:.3g}", src.weight) : fmt::format("{} ep", src.epochs);
    std::printf("%-20s %8s %7lld %10llu %12llu %7.2f%% %8.2f%%\n", src.name.c_str(), weight.c_str(),
                static_cast<long long>(src.passes), static_cast<unsigned long long>(src.records),
                static_cast<unsigned long long>(src.tokens), 100 * src.target_share,
                100 * src.realized_share);
  }
  if (!m.sources.empty() && m.sources[0].weight > 0)
    std::printf("mixture seed %llu\n", static_cast<unsigned long long>(m.mixture_seed));
}

void WriteSourcesJson(JsonWriter& w, const pack::Manifest& m) {
  w.Key("sources").BeginArray();
  for (const auto& src : m.sources) {
    w.BeginObject().Key("name").Str(src.name).Key("weight").Double(src.weight);
    w.Key("epochs").Int(src.epochs).Key("passes").Int(src.passes);
    w.Key("records").Uint(src.records).Key("tokens").Uint(src.tokens);
    w.Key("target_share").Double(src.target_share);
    w.Key("realized_share").Double(src.realized_share).EndObject();
  }
  w.EndArray();
}

// The packing and what it cost: tokens lost to padding and to the tail, documents split.
void PrintPacking(const pack::Manifest& m) {
  std::printf(
      "packing %s%s: %llu padding token(s), %llu token(s) dropped at the tail, %llu "
      "document(s) split over blocks\n",
      std::string(pack::PackingName(m.packing)).c_str(),
      m.packing == pack::Packing::kBfd ? fmt::format(" (seed {})", m.packing_seed).c_str() : "",
      static_cast<unsigned long long>(m.total_padding_tokens),
      static_cast<unsigned long long>(m.total_dropped_tokens),
      static_cast<unsigned long long>(m.total_split_documents));
}

void PrintSummary(const pack::Manifest& m) {
  std::printf("%6s %10s %14s %10s %10s\n", "rank", "records", "tokens", "blocks", "dropped");
  for (const auto& r : m.ranks) {
    std::printf(
        "%6d %10llu %14llu %10llu %10llu\n", r.rank, static_cast<unsigned long long>(r.records),
        static_cast<unsigned long long>(r.tokens), static_cast<unsigned long long>(r.blocks),
        static_cast<unsigned long long>(r.dropped_tokens));
  }
  std::printf(
      "world %d, seq_len %d, shard %s: %llu records, %llu tokens, %llu blocks; "
      "blocks per rank min %llu max %llu spread %llu%s\n",
      m.world, m.seq_len, std::string(pack::ShardModeName(m.shard)).c_str(),
      static_cast<unsigned long long>(m.total_records),
      static_cast<unsigned long long>(m.total_tokens),
      static_cast<unsigned long long>(m.total_blocks()),
      static_cast<unsigned long long>(m.min_blocks()),
      static_cast<unsigned long long>(m.max_blocks()),
      static_cast<unsigned long long>(m.max_blocks() - m.min_blocks()),
      m.complete() ? ""
                   : fmt::format(" (ranks {} only)",
                                 m.ranks.empty() ? "none"
                                                 : fmt::format("{}-{}", m.ranks.front().rank,
                                                               m.ranks.back().rank))
                         .c_str());
  PrintPacking(m);
  if (m.chat_records) {
    std::printf("%llu chat record(s) rendered with %s%s%s\n",
                static_cast<unsigned long long>(m.chat_records), m.chat_template.c_str(),
                m.chat_template_path.empty() ? "" : " ", m.chat_template_path.c_str());
  }
  if (m.loss_mask == "assistant") {
    uint64_t loss = 0, all = 0;
    for (const auto& r : m.ranks) {
      loss += r.loss_tokens;
      all += r.blocks * static_cast<uint64_t>(m.seq_len);
    }
    std::printf("loss mask: %llu of %llu tokens in blocks train (%.1f%%)\n",
                static_cast<unsigned long long>(loss), static_cast<unsigned long long>(all),
                all ? 100.0 * static_cast<double>(loss) / static_cast<double>(all) : 0.0);
  }
  if (m.skipped_bad) {
    std::string reasons;
    for (const auto& [reason, n] : m.skipped_reasons)
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", n, reason);
    std::printf("skipped %llu bad record(s)%s%s%s, listed in %s\n",
                static_cast<unsigned long long>(m.skipped_bad), reasons.empty() ? "" : " (",
                reasons.c_str(), reasons.empty() ? "" : ")", pack::kSkippedFileName);
  }
  PrintSources(m);
  if (m.template_drop_records) {
    std::printf(
        "--allow-template-drops: %llu conversation(s) packed with %llu part(s) their chat "
        "template did not render\n",
        static_cast<unsigned long long>(m.template_drop_records),
        static_cast<unsigned long long>(m.template_drop_parts));
  }
}

// "8-15" or "3".
bool ParseRange(const std::string& s, int* lo, int* hi) {
  auto dash = s.find('-');
  auto a = ParseIntIn(s.substr(0, dash), 0, 1 << 24);
  auto b = dash == std::string::npos ? a : ParseIntIn(s.substr(dash + 1), 0, 1 << 24);
  if (!a || !b) return false;
  *lo = static_cast<int>(*a);
  *hi = static_cast<int>(*b);
  return *hi >= *lo;
}

int RunPackMerge(int argc, char** argv) {
  CLI::App app{
      "Combine the manifests of node-local packs (each made with --ranks) into one,\n"
      "checking that they describe the same pack and cover every rank once.",
      "evenkeel pack merge"};
  std::vector<std::string> dirs;
  std::string out;
  bool json = false;
  app.add_option("dirs", dirs, "pack directories, one per node")->required();
  app.add_option("--out", out, "write the merged manifest.json here (default: print only)");
  app.add_flag("--json", json, "print the merged manifest as JSON");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  std::vector<pack::Manifest> parts;
  for (const auto& d : dirs) {
    auto m = pack::ReadManifest(d);
    if (!m.ok()) return ReportError(m.status());
    parts.push_back(std::move(m).value());
  }
  auto merged = pack::MergeManifests(parts, dirs);
  if (!merged.ok()) return ReportError(merged.status());
  if (!out.empty()) {
    Status st = MakeDirs(out);
    if (st.ok()) st = pack::WriteManifest(out, *merged);
    if (!st.ok()) return ReportError(st);
  }
  if (json) {
    std::fputs(pack::ManifestToJson(*merged).c_str(), stdout);
  } else {
    PrintSummary(*merged);
  }
  return kExitOk;
}

// The files a source's path names: itself, or a glob's matches in sorted order. A glob
// that matches nothing is an error naming the source.
Result<std::vector<std::string>> ExpandSourcePath(const std::string& path,
                                                  const std::string& where) {
  if (path.find_first_of("*?[") == std::string::npos) return std::vector<std::string>{path};
  glob_t g{};
  const int rc = glob(path.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> out;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty())) {
    return InvalidArgumentError(fmt::format("{}: the glob {} matches no file", where, path));
  }
  if (rc != 0) return IoError(fmt::format("{}: cannot list {}", where, path));
  return out;
}

// `evenkeel pack RUN.toml`: the pack's facts come from the run file (the tokenizer is
// the model's, the world the cluster's, the block length train.seq_len, the rest
// [data]'s); a flag may repeat one but not contradict it (usage error naming both).
// Flags the run file has no key for (--threads, --ranks, --skip-bad, --eos,
// --invalid-utf8, --allow-template-drops, --json) keep their meaning.
struct PackFlags {
  std::string shard, chat, loss_mask, shape, columns, tags, packing;
  uint64_t packing_seed = 0;
};
Status FromRunFile(const std::string& path, const CLI::App& app, const PackFlags& flags,
                   pack::PackOptions* opt) {
  EK_ASSIGN_OR_RETURN(run::RunFile rf, run::ReadRunFile(path));
  auto clash = [&](std::string_view flag, const std::string& given, std::string_view key,
                   const std::string& file) -> Status {
    if (!app.count(std::string(flag)) || given == file) return Status::Ok();
    return FailedPreconditionError(fmt::format(
        "{} {} contradicts the run file {}: {} = {}; drop the flag (the run file says it once)",
        flag, given, path, key, file));
  };
  if (rf.model_path.empty()) {
    return InvalidArgumentError(fmt::format(
        "{}: model.path is needed: the pack tokenizes with the model's tokenizer.json", path));
  }
  const std::string tokenizer = rf.Resolve(rf.model_path) + "/tokenizer.json";
  EK_RETURN_IF_ERROR(
      clash("--tokenizer", opt->tokenizer_path, "model.path's tokenizer", tokenizer));
  EK_RETURN_IF_ERROR(clash("--world", std::to_string(opt->world), "the cluster's world",
                           std::to_string(rf.world())));
  EK_RETURN_IF_ERROR(clash("--seq-len", std::to_string(opt->seq_len), "train.seq_len",
                           std::to_string(rf.seq_len)));
  if (rf.pack_dir.empty())
    return InvalidArgumentError(
        fmt::format("{}: data.pack_dir is needed: where the pack goes", path));
  const std::string out = rf.Resolve(rf.pack_dir);
  EK_RETURN_IF_ERROR(clash("--out", opt->out_dir, "data.pack_dir", out));
  EK_RETURN_IF_ERROR(clash("--shard", flags.shard, "data.shard", rf.shard));
  std::string chat = rf.chat_template;
  if (chat != "auto" && chat != "none" && chat != "chatml" && chat != "llama3" && !chat.empty())
    chat = rf.Resolve(chat);
  EK_RETURN_IF_ERROR(clash("--chat-template", flags.chat, "data.chat_template", chat));
  EK_RETURN_IF_ERROR(clash("--loss-mask", flags.loss_mask, "data.loss_mask", rf.loss_mask));
  EK_RETURN_IF_ERROR(clash("--packing", flags.packing, "data.packing", rf.packing));
  EK_RETURN_IF_ERROR(clash("--packing-seed", std::to_string(flags.packing_seed),
                           "data.packing_seed", std::to_string(rf.packing_seed)));
  for (const char* flag : {"--shape", "--columns", "--tags", "--text-field", "--split"}) {
    if (app.count(flag)) {
      return FailedPreconditionError(
          fmt::format("{} with a run file: a source's shape, maps, text field and split are its "
                      "[[data.source]] keys (shape, columns, tags, text_field, split) in {}",
                      flag, path));
    }
  }
  if (rf.sources.empty()) {
    return InvalidArgumentError(fmt::format(
        "{}: no [[data.source]]: the run file names what to pack, e.g.\n[[data.source]]\npath = "
        "\"data/train.jsonl\"",
        path));
  }
  opt->tokenizer_path = tokenizer;
  opt->world = rf.world();
  opt->seq_len = rf.seq_len;
  opt->out_dir = out;
  EK_ASSIGN_OR_RETURN(opt->shard, pack::ParseShardMode(rf.shard));
  EK_ASSIGN_OR_RETURN(opt->chat, pack::ParseChatTemplate(chat));
  EK_ASSIGN_OR_RETURN(opt->loss_mask, pack::ParseLossMask(rf.loss_mask));
  EK_ASSIGN_OR_RETURN(opt->packing, pack::ParsePacking(rf.packing));
  opt->packing_seed = static_cast<uint64_t>(rf.packing_seed);
  opt->mixture_seed = static_cast<uint64_t>(rf.mixture_seed);
  opt->mixture_tokens = static_cast<uint64_t>(rf.mixture_tokens);
  opt->inputs.clear();
  for (size_t i = 0; i < rf.sources.size(); ++i) {
    const run::DataSource& d = rf.sources[i];
    const std::string where = fmt::format("{}: data.source[{}] (line {})", path, i, d.line);
    pack::PackSource src;
    src.name = run::SourceName(d);
    EK_ASSIGN_OR_RETURN(src.inputs, ExpandSourcePath(rf.Resolve(d.path), where));
    if (d.format != "auto") {
      for (const std::string& in : src.inputs) {
        auto kind = ingest::DetectKind(in);
        if (!kind.ok()) return kind.status().WithContext(where);
        if (ingest::FileKindName(*kind) != d.format) {
          return InvalidArgumentError(fmt::format("{}: format = \"{}\", but {} is {}", where,
                                                  d.format, in, ingest::FileKindName(*kind)));
        }
      }
    }
    std::string columns, tags;
    for (const auto& [k, v] : d.columns)
      columns += fmt::format("{}{}={}", columns.empty() ? "" : ",", k, v);
    for (const auto& [k, v] : d.tags) tags += fmt::format("{}{}={}", tags.empty() ? "" : ",", k, v);
    auto shape = pack::ParseShape(d.shape, columns, tags);
    if (!shape.ok()) return shape.status().WithContext(where);
    src.shape = *shape;
    src.text_field = d.text_field;
    if (auto it = src.shape.columns.find("text"); it != src.shape.columns.end()) {
      if (!d.text_field.empty() && d.text_field != it->second) {
        return InvalidArgumentError(
            fmt::format("{}: text_field = \"{}\" contradicts columns.text = \"{}\"", where,
                        d.text_field, it->second));
      }
      src.text_field = it->second;
    }
    src.split = d.split;
    src.weight = d.weight;
    src.epochs = d.epochs;
    opt->sources.push_back(std::move(src));
  }
  return Status::Ok();
}

// True when the command line's one positional argument is a run file.
bool RunFileMode(int argc, char** argv) {
  int positional = 0;
  (void)positional;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (!a.starts_with("-") && a.ends_with(".toml")) return true;
  }
  return false;
}

}  // namespace

int RunPack(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "merge") return RunPackMerge(argc - 1, argv + 1);
  CLI::App app{
      "Tokenize records once and pack them into fixed blocks per rank:\n"
      "DIR/rank-NNNNN.i32 (little-endian int32, no header), DIR/rank-NNNNN.docs (where\n"
      "each document starts: little-endian uint64 token offsets) and DIR/manifest.json.\n"
      "'evenkeel pack merge DIR...' combines node manifests made with --ranks.",
      "evenkeel pack"};
  pack::PackOptions opt;
  std::string shard = "balanced", chat = "auto", loss_mask = "none", ranks, invalid = "error", eos;
  std::string shape = "auto", columns, tags, packing = "sequential";
  uint64_t packing_seed = 0;
  bool json = false;
  // With a run file (RUN.toml as the one input) the tokenizer, world, block length, output
  // and sources are its; without one, the flags say them.
  const bool from_run = RunFileMode(argc, argv);
  auto* tokenizer_opt =
      app.add_option("--tokenizer", opt.tokenizer_path, "Hugging Face tokenizer.json");
  auto* world_opt = app.add_option("--world", opt.world, "number of ranks (GPUs)");
  app.add_option("--seq-len", opt.seq_len, "tokens per block")->capture_default_str();
  auto* out_opt = app.add_option("--out", opt.out_dir, "output directory");
  if (!from_run) {
    tokenizer_opt->required();
    world_opt->required();
    out_opt->required();
  }
  app.add_option("inputs", opt.inputs,
                 "RUN.toml (the run file's model tokenizer, cluster world, train.seq_len, "
                 "data.pack_dir and [[data.source]] tables: docs/run_format.md), or record files, "
                 "in order: .jsonl, .jsonl.zst, .jsonl.gz, .json (JSON lines or one "
                 "array of objects), .parquet, .arrow, or a datasets directory (save_to_disk); a "
                 "byte-order mark is skipped (docs/pack_format.md, \"Inputs\")")
      ->required();
  app.add_option(
         "--shard", shard,
         "balanced (every rank gets the same block count, so evenfix drops nothing) | contiguous | "
         "strided (records split as datasets.shard does; ranks' block counts may differ)")
      ->check(CLI::IsMember({"contiguous", "strided", "balanced"}))
      ->capture_default_str();
  app.add_option("--split", opt.split,
                 "a datasets DatasetDict directory among the inputs: the split to read (train, "
                 "test, ...); needed when it has several");
  app.add_option("--text-field", opt.record.text_field, "field holding the text")
      ->capture_default_str();
  app.add_option("--chat-template", chat,
                 "how records with \"messages\" are rendered: auto (the chat_template of "
                 "tokenizer_config.json "
                 "beside the tokenizer), FILE.jinja, chatml, llama3, or none (refuse them); "
                 "records with a text "
                 "field pass through unchanged")
      ->capture_default_str();
  app.add_option("--shape", shape,
                 "the records' shape: auto (by the fields each record has) | text | messages | "
                 "sharegpt | alpaca | prompt-completion (docs/data_shapes.md)")
      ->check(
          CLI::IsMember({"auto", "text", "messages", "sharegpt", "alpaca", "prompt-completion"}))
      ->capture_default_str();
  app.add_option("--columns", columns,
                 "the records' field names, as LLaMA-Factory's dataset_info columns: e.g. "
                 "messages=conversations,system=sys (keys: messages, system, tools, prompt, "
                 "query, response, history, text)");
  app.add_option("--tags", tags,
                 "the messages' key and role names, as LLaMA-Factory's dataset_info tags: e.g. "
                 "role_tag=from,content_tag=value,user_tag=human,assistant_tag=gpt (keys: "
                 "role_tag, content_tag, user_tag, assistant_tag, observation_tag, "
                 "function_tag, system_tag)");
  app.add_flag("--allow-template-drops", opt.record.allow_template_drops,
               "pack conversations whose rendering lost a message's content, a tool or a tool "
               "call (the chat template ignores it), counting them in the manifest's "
               "template_drops, instead of refusing them");
  app.add_option(
         "--loss-mask", loss_mask,
         "assistant: write rank-NNNNN.mask beside each block file marking the tokens the assistant "
         "generates (docs/pack_format.md); none: every token trains")
      ->check(CLI::IsMember({"none", "assistant"}))
      ->capture_default_str();
  app.add_option("--packing", packing,
                 "sequential (records end to end, a record cut at a block's end going on in the "
                 "next) | bfd (best-fit-decreasing bins padded with EOS: fewer records cut; "
                 "docs/pack_format.md)")
      ->check(CLI::IsMember({"sequential", "bfd"}))
      ->capture_default_str();
  app.add_option("--packing-seed", packing_seed,
                 "bfd: the seed of the order of records of equal length")
      ->capture_default_str();
  app.add_option("--eos", eos,
                 "EOS token appended to every record (default: tokenizer_config.json's)");
  app.add_option("--ranks", ranks, "write only ranks A-B (one node's), e.g. 8-15");
  app.add_option("--threads", opt.threads, "worker threads (default: all cores)");
  app.add_flag("--skip-bad", opt.skip_bad,
               "skip records that cannot be used: each is listed (file, line, reason) in "
               "DIR/skipped.jsonl, counted by reason in the manifest, and owned by no rank");
  app.add_option("--invalid-utf8", invalid,
                 "error | replace (U+FFFD, as Python's errors=\"replace\")")
      ->check(CLI::IsMember({"error", "replace"}))
      ->capture_default_str();
  app.add_flag("--json", json, "print the manifest as JSON instead of the table");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (from_run) {
    if (opt.inputs.size() != 1) {
      return UsageError(fmt::format(
          "a run file is the one input (its [[data.source]] tables name the data), not {} inputs",
          opt.inputs.size()));
    }
    const std::string run_path = opt.inputs[0];
    if (Status st = FromRunFile(
            run_path, app,
            PackFlags{shard, chat, loss_mask, shape, columns, tags, packing, packing_seed}, &opt);
        !st.ok()) {
      if (st.code() == StatusCode::kFailedPrecondition) return UsageError(st.message());
      return ReportError(st.WithContext("pack"));
    }
    shard = std::string(pack::ShardModeName(opt.shard));
    loss_mask = std::string(pack::LossMaskName(opt.loss_mask));
  }
  auto parsed_shape = pack::ParseShape(shape, columns, tags);
  if (!parsed_shape.ok()) return UsageError(parsed_shape.status().message());
  opt.record.shape = *parsed_shape;
  // One name for the text field, whichever flag gives it (the manifest records it).
  if (auto it = opt.record.shape.columns.find("text"); it != opt.record.shape.columns.end()) {
    if (app.count("--text-field") && opt.record.text_field != it->second) {
      return UsageError(fmt::format("--text-field {} contradicts --columns text={}",
                                    opt.record.text_field, it->second));
    }
    opt.record.text_field = it->second;
  }
  if (!from_run) {
    auto mode = pack::ParseShardMode(shard);
    if (!mode.ok()) return ReportError(mode.status());
    opt.shard = *mode;
    auto tmpl = pack::ParseChatTemplate(chat);
    if (!tmpl.ok()) return ReportError(tmpl.status());
    opt.chat = *tmpl;
    auto mask = pack::ParseLossMask(loss_mask);
    if (!mask.ok()) return ReportError(mask.status());
    opt.loss_mask = *mask;
    auto strategy = pack::ParsePacking(packing);
    if (!strategy.ok()) return UsageError(strategy.status().message());
    opt.packing = *strategy;
    opt.packing_seed = packing_seed;
  }
  opt.record.invalid_utf8 =
      invalid == "replace" ? InvalidUtf8Policy::kReplace : InvalidUtf8Policy::kError;
  if (!eos.empty()) opt.eos_token = eos;
  if (!ranks.empty() && !ParseRange(ranks, &opt.rank_lo, &opt.rank_hi)) {
    return UsageError("--ranks " + ranks + ": wants A-B with A <= B, e.g. 8-15");
  }
  Progress progress("pack");
  auto on_progress = [&](const pack::PackProgress& p) {
    double rate = p.seconds > 0 ? p.tokens / p.seconds : 0;
    const std::string speed =
        fmt::format("{:.0f} records/s, {:.2f} M tokens/s",
                    p.seconds > 0 ? p.records_done / p.seconds : 0, rate / 1e6);
    if (p.records_total == 0 && p.input_bytes_total > 0) {  // read once: nothing counted first
      progress.Update(p.input_bytes_done >> 20, std::max<uint64_t>(p.input_bytes_total >> 20, 1),
                      fmt::format("MiB of input, {} records, {}", p.records_done, speed));
    } else {
      progress.Update(p.records_done, p.records_total, "records, " + speed);
    }
  };
  auto m = pack::Pack(opt, on_progress);
  progress.Finish();
  if (!m.ok()) return ReportError(m.status().WithContext("pack"));
  if (json) {
    std::fputs(pack::ManifestToJson(*m).c_str(), stdout);
  } else {
    PrintSummary(*m);
  }
  return kExitOk;
}

int RunInspect(int argc, char** argv) {
  CLI::App app{
      "Verify a pack against its manifest (sizes, checksums, every token below the\n"
      "vocabulary size and none above the manifest's max_id) and print blocks per rank and\n"
      "the spread; or show one block.",
      "evenkeel inspect"};
  std::string dir, tokenizer;
  int rank = -1;
  int64_t block = -1;
  bool decode = false, json = false;
  size_t threads = 0;
  app.add_option("dir", dir, "pack directory")->required();
  app.add_option("--rank", rank, "with --block: show this rank's block");
  app.add_option("--block", block, "block index within the rank");
  app.add_flag("--decode", decode, "show the block as text (needs the tokenizer)");
  app.add_option("--tokenizer", tokenizer, "tokenizer.json (default: the one the manifest names)");
  app.add_option("--threads", threads, "verification threads (default: all cores)");
  app.add_flag("--json", json, "machine-readable report");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if ((rank >= 0) != (block >= 0)) return UsageError("--rank and --block go together");
  auto m = pack::ReadManifest(dir);
  if (!m.ok()) return ReportError(m.status());
  if (rank >= 0 || block >= 0) {
    auto ids = pack::ReadBlock(dir, *m, rank, static_cast<uint64_t>(block));
    if (!ids.ok()) return ReportError(ids.status());
    if (!decode) {
      std::string out;
      AppendIntArray(&out, ids->data(), ids->size());
      std::printf("%s\n", out.c_str());
      return kExitOk;
    }
    auto tok = tokenize::Tokenizer::FromFile(tokenizer.empty() ? m->tokenizer_path : tokenizer);
    if (!tok.ok()) return ReportError(tok.status());
    std::string bytes, text;
    Status st = (*tok)->Decode(*ids, &bytes);
    if (!st.ok()) return ReportError(st);
    tokenize::ReplaceInvalidUtf8(bytes, &text);
    if (json) {
      JsonWriter w;
      w.BeginObject().Key("rank").Int(rank).Key("block").Int(block).Key("text").Str(text);
      std::fputs(w.EndObject().Line().c_str(), stdout);
    } else {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fputc('\n', stdout);
    }
    return kExitOk;
  }
  pack::InspectReport report = pack::InspectWith(*m, dir, threads, true);
  const bool docs = pack::HasDocs(*m);
  uint64_t documents = 0;
  for (const auto& r : m->ranks) documents += r.documents;
  if (json) {
    JsonWriter w;
    w.BeginObject().Key("ok").Bool(report.ok()).Key("complete").Bool(m->complete());
    w.Key("world").Int(m->world).Key("seq_len").Int(m->seq_len);
    w.Key("vocab_size").Int(m->vocab_size).Key("max_id").Int(m->largest_id());
    w.Key("global_min_blocks").Uint(m->min_blocks()).Key("global_max_blocks").Uint(m->max_blocks());
    w.Key("spread").Uint(m->max_blocks() - m->min_blocks()).Key("ranks").BeginArray();
    for (size_t i = 0; i < report.ranks.size(); ++i) {
      const auto& r = report.ranks[i];
      w.BeginObject().Key("rank").Int(r.rank).Key("blocks").Uint(m->ranks[i].blocks);
      if (docs) w.Key("documents").Uint(m->ranks[i].documents);
      w.Key("ok").Bool(r.problems.empty()).Key("problems").StrArray(r.problems).EndObject();
    }
    w.EndArray();
    w.Key("has_docs").Bool(docs);
    if (docs) w.Key("documents").Uint(documents);
    w.Key("packing").Str(pack::PackingName(m->packing)).Key("packing_seed").Uint(m->packing_seed);
    w.Key("padding_tokens").Uint(m->total_padding_tokens);
    w.Key("dropped_tokens").Uint(m->total_dropped_tokens);
    w.Key("split_documents").Uint(m->total_split_documents);
    WriteSourcesJson(w, *m);
    std::fputs(w.EndObject().Line().c_str(), stdout);
  } else {
    std::printf("%6s %10s %10s  %s\n", "rank", "blocks", "documents", "check");
    for (size_t i = 0; i < report.ranks.size(); ++i) {
      const auto& r = report.ranks[i];
      std::printf("%6d %10llu %10s  %s\n", r.rank,
                  static_cast<unsigned long long>(m->ranks[i].blocks),
                  docs ? std::to_string(m->ranks[i].documents).c_str() : "-",
                  r.problems.empty() ? "ok" : r.problems.front().c_str());
      for (size_t k = 1; k < r.problems.size(); ++k)
        std::printf("%29s%s\n", "", r.problems[k].c_str());
    }
    if (docs) {
      std::printf("document boundaries: %llu document start(s) in the docs files\n",
                  static_cast<unsigned long long>(documents));
    } else {
      std::printf(
          "document boundaries: none (a pack made before them; repack for isolated "
          "attention)\n");
    }
    std::printf("blocks per rank: min %llu, max %llu, spread %llu%s\n",
                static_cast<unsigned long long>(m->min_blocks()),
                static_cast<unsigned long long>(m->max_blocks()),
                static_cast<unsigned long long>(m->max_blocks() - m->min_blocks()),
                m->complete() ? "" : " (manifest covers only some ranks)");
    PrintPacking(*m);
    PrintSources(*m);
  }
  if (!report.ok()) {
    return ReportNo(dir + ": the pack does not match its manifest");
  }
  return kExitOk;
}

}  // namespace ek::cli
