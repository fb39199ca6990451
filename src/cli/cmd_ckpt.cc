// evenkeel ckpt verify / list: check consolidated checkpoints
// (docs/checkpoint_format.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <ctime>
#include <string>

#include "ckpt/checkpoint.h"
#include "cli/commands.h"
#include "core/json_out.h"
#include "run/plan.h"

namespace ek::cli {

namespace {

std::string_view LevelName(ckpt::VerifyLevel level) {
  return level == ckpt::VerifyLevel::kFull ? "full" : "structure";
}

std::string ReportJson(const std::string& dir, const ckpt::VerifyReport& r) {
  JsonWriter w(JsonWriter::kSpaced);
  w.BeginObject().Key("dir").Str(dir).Key("ok").Bool(r.ok).Key("level").Str(LevelName(r.level));
  w.Key("has_manifest").Bool(r.has_manifest).Key("step").Int(r.step);
  w.Key("total_bytes").Uint(r.total_bytes).Key("tensor_count").Uint(r.tensor_count);
  w.Key("shard_count").Int(r.shard_count).Key("seconds").Fixed(r.seconds, 3);
  w.Key("weights_ok").Bool(r.weights_ok).Key("has_train_state").Bool(r.has_train_state);
  w.Key("train_state_ok").Bool(r.train_state_ok).Key("train_state_world").Int(r.train_state_world);
  w.Key("train_state_problems").StrArray(r.train_state_problems);
  return w.Key("problems").StrArray(r.problems).EndObject().Line();
}

// The training state's verdict, a line under the checkpoint's.
std::string TrainStateLine(const ckpt::VerifyReport& r) {
  if (!r.has_manifest) return "";
  if (!r.has_train_state)
    return "  train state: none (saved before format 2 or without it): resumes weights only\n";
  if (r.train_state_ok)
    return fmt::format("  train state: ok (world {}): resumes fully{}\n", r.train_state_world,
                       r.weights_ok ? "" : ", but the weights fail");
  return fmt::format("  train state: FAILED (world {}): {}\n", r.train_state_world,
                     r.train_state_problems.empty() ? "" : r.train_state_problems.front());
}

std::string Bytes(uint64_t n) { return n == 0 ? "0 B" : run::FormatBytes(static_cast<double>(n)); }

std::string Count(uint64_t n, std::string_view what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

// "3m", "5h", "2d": how long ago, coarse.
std::string Age(double mtime) {
  double s = std::max(0.0, static_cast<double>(std::time(nullptr)) - mtime);
  if (s < 120) return fmt::format("{:.0f}s", s);
  if (s < 7200) return fmt::format("{:.0f}m", s / 60);
  if (s < 172800) return fmt::format("{:.0f}h", s / 3600);
  return fmt::format("{:.0f}d", s / 86400);
}

int RunVerify(const std::string& dir, bool quick, bool json, bool no_manifest) {
  ckpt::VerifyOptions options;
  options.level = quick ? ckpt::VerifyLevel::kStructure : ckpt::VerifyLevel::kFull;
  options.require_manifest = !no_manifest;
  auto r = ckpt::VerifyCheckpoint(dir, options);
  if (!r.ok()) return ReportError(r.status());
  if (json) {
    std::fputs(ReportJson(dir, *r).c_str(), stdout);
  } else {
    std::string what =
        fmt::format("{}, {}, {}, {}, {:.1f} s", LevelName(r->level), Count(r->shard_count, "shard"),
                    Count(r->tensor_count, "tensor"), Bytes(r->total_bytes), r->seconds);
    if (r->ok) {
      std::printf("%s: ok (%s)\n", dir.c_str(), what.c_str());
    } else {
      std::printf("%s: FAILED (%s): %s\n", dir.c_str(), what.c_str(),
                  Count(r->problems.size(), "problem").c_str());
      for (const auto& p : r->problems) std::printf("  %s\n", p.c_str());
    }
    std::fputs(TrainStateLine(*r).c_str(), stdout);
  }
  if (!r->ok) {
    return ReportNo(fmt::format("{}: {}", dir, r->problems.front()));
  }
  return kExitOk;
}

int RunList(const std::string& ckpt_dir, bool quick, bool json) {
  auto level = quick ? ckpt::VerifyLevel::kStructure : ckpt::VerifyLevel::kFull;
  auto list = ckpt::ListCheckpoints(ckpt_dir, level);
  if (!list.ok()) return ReportError(list.status());
  if (json) {
    JsonWriter w(JsonWriter::kSpaced);
    w.BeginArray(JsonWriter::kLines);
    for (const auto& e : *list) {
      w.BeginObject().Key("name").Str(e.name).Key("path").Str(e.path).Key("step").Int(e.step);
      w.Key("temp").Bool(e.temp).Key("ok").Bool(e.ok).Key("bytes").Uint(e.bytes);
      w.Key("resume").Str(e.Resume());
      w.Key("mtime").Fixed(e.mtime, 3).Key("verdict").Str(e.verdict).EndObject();
    }
    std::fputs(w.EndArray().Line().c_str(), stdout);
    return kExitOk;
  }
  if (list->empty()) {
    std::printf("%s: no checkpoints\n", ckpt_dir.c_str());
    return kExitOk;
  }
  // RESUME: what a restart from it restores ("full": weights and training state,
  // "weights", "-": it does not verify).
  std::printf("%-10s %10s %6s %-7s  %s\n", "STEP", "SIZE", "AGE", "RESUME", "VERDICT");
  for (const auto& e : *list) {
    std::string step = e.temp ? fmt::format("({})", e.step) : fmt::format("{}", e.step);
    std::printf("%-10s %10s %6s %-7s  %s\n", step.c_str(), Bytes(e.bytes).c_str(),
                Age(e.mtime).c_str(), e.Resume().c_str(), e.verdict.c_str());
  }
  return kExitOk;
}

}  // namespace

int RunCkpt(int argc, char** argv) {
  CLI::App app{
      "Check consolidated checkpoints (safetensors shards + evenkeel-checkpoint.json).\n"
      "Exit 0: verified; 1: a check failed; 2: usage; 65: the directory is missing or unreadable.",
      "evenkeel ckpt"};
  app.require_subcommand(1);
  std::string dir;
  bool quick = false, json = false, no_manifest = false;
  CLI::App* verify =
      app.add_subcommand("verify", "verify one checkpoint directory (full: re-hash every byte)");
  verify->add_option("dir", dir, "checkpoint directory, e.g. CKPT_DIR/step-00000010")->required();
  verify->add_flag("--quick", quick,
                   "structure only: manifest, index, shard headers, sizes (no hashing)");
  verify->add_flag("--json", json, "machine-readable report");
  verify->add_flag(
      "--no-manifest", no_manifest,
      "check a Hugging Face directory from another tool (no evenkeel-checkpoint.json)");
  CLI::App* list =
      app.add_subcommand("list", "list the step directories of CKPT_DIR with a verdict each");
  list->add_option("ckpt_dir", dir, "checkpoint directory of a run")->required();
  list->add_flag("--quick", quick, "structure only (no hashing)");
  list->add_flag("--json", json, "machine-readable list");
  if (auto code = ParseArgs(app, argc, argv)) return *code;
  if (verify->parsed()) return RunVerify(dir, quick, json, no_manifest);
  return RunList(dir, quick, json);
}

}  // namespace ek::cli
