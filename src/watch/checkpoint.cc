#include "watch/checkpoint.h"

#include <dirent.h>
#include <fmt/format.h>
#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/file.h"

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

// 8-byte little-endian header length, then the JSON header whose tensors'
// data_offsets are relative to the end of the header.
bool SafetensorsExpectedSize(const std::string& path, uint64_t* file_size, uint64_t* data_bytes) {
  auto text = ReadFile(path);
  if (!text.ok() || text->size() < 8) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>((*text)[i]);
  if (n > text->size() - 8) return false;
  simdjson::ondemand::parser parser;
  simdjson::padded_string header(text->substr(8, n));
  simdjson::ondemand::document doc;
  simdjson::ondemand::object o;
  if (parser.iterate(header).get(doc) || doc.get_object().get(o)) return false;
  uint64_t end = 0;
  for (auto field : o) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    if (key == "__metadata__") continue;
    simdjson::ondemand::object t;
    if (field.value().get_object().get(t)) return false;
    simdjson::ondemand::array offs;
    if (t["data_offsets"].get_array().get(offs)) return false;
    uint64_t last = 0;
    for (auto x : offs) {
      uint64_t v;
      if (x.get_uint64().get(v)) return false;
      last = v;
    }
    end = std::max(end, last);
  }
  *file_size = 8 + n + end;
  *data_bytes = end;
  return true;
}

void InspectHfIndex(const std::string& path, const std::string& index, CheckpointInfo* info) {
  auto text = ReadFile(path + "/" + index);
  if (!text.ok()) {
    info->why = "index unreadable";
    return;
  }
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(*text);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc)) {
    info->why = index + ": not JSON";
    return;
  }
  std::set<std::string> shards;
  uint64_t total_size = 0;
  bool have_total = false;
  simdjson::ondemand::object wm;
  if (doc["weight_map"].get_object().get(wm)) {
    info->why = index + ": no weight_map";
    return;
  }
  for (auto field : wm) {
    std::string_view f;
    if (field.value().get_string().get(f)) {
      info->why = index + ": bad weight_map";
      return;
    }
    shards.emplace(f);
  }
  doc.rewind();
  if (!doc["metadata"]["total_size"].get_uint64().get(total_size)) have_total = true;
  uint64_t data = 0;
  for (const auto& shard : shards) {
    struct stat st;
    std::string sp = path + "/" + shard;
    if (stat(sp.c_str(), &st) != 0) {
      info->why = fmt::format("shard {} missing", shard);
      return;
    }
    if (shard.ends_with(".safetensors")) {
      uint64_t want = 0, bytes = 0;
      if (!SafetensorsExpectedSize(sp, &want, &bytes)) {
        info->why = fmt::format("shard {}: unreadable header", shard);
        return;
      }
      if (static_cast<uint64_t>(st.st_size) != want) {
        info->why = fmt::format("shard {}: {} bytes, header says {}", shard, st.st_size, want);
        return;
      }
      data += bytes;
    }
  }
  if (have_total && data != 0 && data != total_size) {
    info->why = fmt::format("tensors hold {} bytes, index says {}", data, total_size);
    return;
  }
  info->complete = true;
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
  bool dcp_metadata = false, dcp_shards = false;
  for (const auto& f : List(path)) {
    struct stat fs;
    if (stat((path + "/" + f).c_str(), &fs) != 0 || !S_ISREG(fs.st_mode)) continue;
    info.files++;
    info.bytes += fs.st_size;
    info.mtime = std::max(info.mtime, MtimeOf(fs));
    if (f.ends_with(".index.json")) index = f;
    if (f == ".metadata") dcp_metadata = true;
    if (f.ends_with(".distcp")) dcp_shards = true;
  }
  if (IsTemp(name)) {
    info.why = "temporary directory";
  } else if (!index.empty()) {
    InspectHfIndex(path, index, &info);
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
  for (const auto& name : List(dir)) {
    CheckpointInfo info = InspectCheckpoint(dir, name);
    if (info.complete) {
      scan.complete_count++;
      if (!scan.newest_complete || info.step > scan.newest_complete->step) scan.newest_complete = info;
    } else if (info.step >= 0 || IsTemp(name)) {
      if (!scan.in_progress || info.mtime > scan.in_progress->mtime) scan.in_progress = info;
    }
  }
  // A leftover partial save older than the newest complete one is not in progress.
  if (scan.in_progress && scan.newest_complete && scan.in_progress->step >= 0 &&
      scan.in_progress->step <= scan.newest_complete->step && !IsTemp(scan.in_progress->name)) {
    scan.in_progress.reset();
  }
  return scan;
}

}  // namespace ek::watch
