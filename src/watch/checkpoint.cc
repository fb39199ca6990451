#include "watch/checkpoint.h"

#include <dirent.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <cstring>
#include <set>

#include "ckpt/checkpoint.h"
#include "core/file.h"
#include "core/json_fields.h"

namespace ek::watch {

namespace {

int64_t StepOf(const std::string& name) {
  int64_t step = -1;
  size_t i = 0;
  while (i < name.size()) {
    if (name[i] >= '0' && name[i] <= '9') {
      int64_t v = 0;
      size_t j = i;
      while (j < name.size() && name[j] >= '0' && name[j] <= '9' && j - i < 18) v = v * 10 + (name[j++] - '0');
      step = v;
      i = j;
    } else {
      ++i;
    }
  }
  return step;
}

bool IsTemp(const std::string& name) {
  return name.find(".tmp") != std::string::npos || name.find(".partial") != std::string::npos ||
         (!name.empty() && name[0] == '.');
}

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

double MtimeOf(const struct stat& st) { return st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9; }

// An index over non-safetensors shards (pytorch_model.bin.index.json):
// complete when every shard in weight_map exists. Safetensors indexes go to
// ek_ckpt, which also checks the shards' headers and sizes.
void InspectBinIndex(const std::string& path, const std::string& index, CheckpointInfo* info) {
  auto text = ReadFile(path + "/" + index);
  if (!text.ok()) {
    info->why = "index unreadable";
    return;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(*text).get(root)) {
    info->why = index + ": not JSON";
    return;
  }
  auto f = JsonFields::Root(root, index);
  JsonFields wm = f.ok() ? *f : JsonFields(root, index);
  Status st = f.ok() ? f->Object("weight_map", &wm) : f.status();
  std::set<std::string> shards;
  for (std::string_view tensor : st.ok() ? wm.Keys() : std::vector<std::string_view>{}) {
    std::string shard;
    st = wm.Str(tensor, &shard);
    if (!st.ok()) break;
    shards.insert(std::move(shard));
  }
  if (!st.ok()) {
    info->why = st.message();  // "model.bin.index.json: weight_map.lm_head.weight: not a string"
    return;
  }
  for (const auto& shard : shards) {
    struct stat st;
    if (stat((path + "/" + shard).c_str(), &st) != 0) {
      info->why = fmt::format("shard {} missing", shard);
      return;
    }
  }
  info->complete = true;
}

// A directory with evenkeel-checkpoint.json or a safetensors index: complete
// when ek_ckpt verifies its structure (manifest, index, shard headers, sizes),
// the manifest required only when there is one.
void InspectVerified(const std::string& path, bool has_manifest, CheckpointInfo* info) {
  ckpt::VerifyOptions options;
  options.level = ckpt::VerifyLevel::kStructure;
  options.require_manifest = has_manifest;
  auto report = ckpt::VerifyCheckpoint(path, options);
  if (!report.ok()) {
    info->why = report.status().message();
  } else if (!report->ok) {
    info->why = report->problems.front();
  } else {
    info->complete = true;
  }
}

}  // namespace

CheckpointInfo InspectCheckpoint(const std::string& dir, const std::string& name) {
  CheckpointInfo info;
  info.name = name;
  info.step = StepOf(name);
  std::string path = dir + "/" + name;
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    info.why = "vanished";
    return info;
  }
  if (S_ISREG(st.st_mode)) {
    info.files = 1;
    info.bytes = st.st_size;
    info.mtime = MtimeOf(st);
    if (IsTemp(name)) {
      info.why = "temporary file";
    } else if (st.st_size == 0) {
      info.why = "empty";
    } else {
      info.complete = true;
    }
    return info;
  }
  if (!S_ISDIR(st.st_mode)) {
    info.why = "not a file or directory";
    return info;
  }
  std::string index;
  bool manifest = false, safetensors_index = false, dcp_metadata = false, dcp_shards = false;
  for (const auto& f : List(path)) {
    struct stat fs;
    if (stat((path + "/" + f).c_str(), &fs) != 0 || !S_ISREG(fs.st_mode)) continue;
    info.files++;
    info.bytes += fs.st_size;
    info.mtime = std::max(info.mtime, MtimeOf(fs));
    if (f.ends_with(".index.json")) index = f;
    if (f.ends_with(".safetensors.index.json")) safetensors_index = true;
    if (f == ckpt::kManifestName) manifest = true;
    if (f == ".metadata") dcp_metadata = true;
    if (f.ends_with(".distcp")) dcp_shards = true;
  }
  if (IsTemp(name)) {
    info.why = "temporary directory";
  } else if (manifest || safetensors_index) {
    InspectVerified(path, manifest, &info);
  } else if (!index.empty()) {
    InspectBinIndex(path, index, &info);
  } else if (dcp_shards || dcp_metadata) {
    info.complete = dcp_metadata && dcp_shards;
    if (!info.complete) info.why = dcp_metadata ? "no .distcp shards" : "no .metadata yet";
  } else {
    info.why = "no index (*.index.json or .metadata) yet";
  }
  return info;
}

CheckpointScan ScanCheckpoints(const std::string& dir) {
  CheckpointScan scan;
  if (dir.empty()) return scan;
  // evenkeel's own checkpoints (step-NNNNNNNN and their hidden temp directories) are
  // judged by ek_ckpt's rule, the one the launcher, the trainer and `ckpt list` use;
  // the format rules below are for other trainers' entries only.
  std::map<std::string, const ckpt::CheckpointEntry*> own;
  auto listed = ckpt::ListCheckpoints(dir, ckpt::VerifyLevel::kStructure);
  if (listed.ok()) {
    for (const auto& e : *listed) own[e.name] = &e;
  }
  auto consider = [&](CheckpointInfo info, bool temp) {
    if (info.complete) {
      scan.complete_count++;
      if (!scan.newest_complete || info.step > scan.newest_complete->step) scan.newest_complete = info;
    } else if (info.step >= 0 || temp) {
      if (!scan.in_progress || info.mtime > scan.in_progress->mtime) scan.in_progress = info;
    }
  };
  for (const auto& name : List(dir)) {
    auto it = own.find(name);
    if (it == own.end()) {
      CheckpointInfo info = InspectCheckpoint(dir, name);
      consider(info, IsTemp(name));
      continue;
    }
    const ckpt::CheckpointEntry& e = *it->second;
    if (e.temp && e.verdict.rfind("abandoned", 0) == 0) continue;  // a dead writer's leftover: not a save under way
    CheckpointInfo info;
    info.name = e.name;
    info.step = e.step;
    info.complete = e.ok;
    info.bytes = e.bytes;
    info.mtime = e.mtime;
    if (!e.ok) info.why = e.verdict;
    struct stat st;
    for (const auto& f : List(e.path)) {
      if (stat((e.path + "/" + f).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        info.files++;
        info.mtime = std::max(info.mtime, MtimeOf(st));
      }
    }
    consider(info, e.temp);
  }
  // A leftover partial save older than the newest complete one is not in progress.
  if (scan.in_progress && scan.newest_complete && scan.in_progress->step >= 0 &&
      scan.in_progress->step <= scan.newest_complete->step && !IsTemp(scan.in_progress->name)) {
    scan.in_progress.reset();
  }
  return scan;
}

}  // namespace ek::watch
