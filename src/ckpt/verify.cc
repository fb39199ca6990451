// VerifyCheckpoint: the manifest, the safetensors index and shard headers,
// file sizes, and (kFull) every byte against the manifest's chunk hashes.
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "ckpt/checkpoint.h"
#include "ckpt/internal.h"
#include "ckpt/safetensors.h"
#include "core/file.h"
#include "core/json_check.h"
#include "core/json_fields.h"
#include "core/thread_pool.h"

namespace ek::ckpt {

namespace internal {

void RunParallel(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
  if (threads == 0) threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  threads = std::min(threads, n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  ThreadPool pool(threads);
  pool.ParallelFor(n, [&](size_t i, size_t) { fn(i); });
}

}  // namespace internal

using namespace internal;

namespace {

constexpr size_t kMaxProblems = 50;
constexpr std::string_view kSafetensorsExt = ".safetensors";
constexpr std::string_view kIndexExt = ".safetensors.index.json";

bool PlainName(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos &&
         s.find('\0') == std::string_view::npos;
}

struct Index {
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> shard, as written
  std::optional<uint64_t> total_size;
};

// One verification: the directory's listing, what has been learned, and the
// problems found so far.
class Verifier {
 public:
  Verifier(const std::string& dir, const VerifyOptions& options) : dir_(dir), options_(options) {}

  Result<VerifyReport> Run() {
    auto t0 = std::chrono::steady_clock::now();
    report_.level = options_.level;
    EK_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(dir_));
    for (auto& e : entries) {
      if (e.regular) report_.total_bytes += e.size;
      files_.emplace(e.name, std::move(e));
    }
    if (const DirEntry* sub = Find(std::string(kTrainStateDir)); sub && sub->directory) {
      // The training state's files count towards the checkpoint's bytes whether
      // or not the manifest names them.
      if (auto inside = ListDir(dir_ + "/" + std::string(kTrainStateDir)); inside.ok()) {
        for (auto& e : *inside) {
          if (e.regular) report_.total_bytes += e.size;
          state_files_.emplace(std::string(kTrainStateDir) + "/" + e.name, std::move(e));
        }
        state_listed_ = true;
      }
    }
    ReadManifest();
    if (manifest_) CheckManifestFiles();
    CheckWeights();
    if (manifest_ && options_.level == VerifyLevel::kFull) CheckHashes(sized_ok_, false);
    weight_problems_ = problems_;
    if (manifest_ && manifest_->train_state) CheckTrainState();
    if (problems_ > kMaxProblems) {
      report_.problems.push_back(fmt::format("... and {} more problems", problems_ - kMaxProblems));
    }
    report_.weights_ok = weight_problems_ == 0;
    report_.train_state_ok = report_.has_train_state && state_problems_ == 0;
    report_.ok = report_.weights_ok && (!report_.has_train_state || report_.train_state_ok);
    report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::move(report_);
  }

 private:
  void Problem(std::string p) {
    if (++problems_ <= kMaxProblems) report_.problems.push_back(std::move(p));
  }
  // A problem of the training state: in train_state_problems and in problems.
  // Each message starts with "train_state" (a file's name or the directory).
  void StateProblem(std::string p) {
    if (++state_problems_ <= kMaxProblems) report_.train_state_problems.push_back(p);
    Problem(std::move(p));
  }
  const DirEntry* Find(const std::string& name) const {
    auto it = files_.find(name);
    return it == files_.end() ? nullptr : &it->second;
  }

  void ReadManifest() {
    const std::string name(kManifestName);
    auto from_name = StepOfFinalName(BaseName(dir_));
    if (from_name) report_.step = *from_name;
    const DirEntry* e = Find(name);
    if (e == nullptr) {
      if (options_.require_manifest)
        Problem("no evenkeel-checkpoint.json: incomplete or not an evenkeel checkpoint");
      return;
    }
    if (!e->regular) {
      Problem(name + ": not a regular file");
      return;
    }
    auto text = ReadFile(dir_ + "/" + name);
    if (!text.ok()) {
      Problem(text.status().message());
      return;
    }
    auto m = CheckpointManifestFromJson(*text, name);
    if (!m.ok()) {
      Problem(m.status().message());
      return;
    }
    manifest_ = std::move(*m);
    report_.has_manifest = true;
    report_.step = manifest_->step;
    if (from_name && *from_name != manifest_->step) {
      Problem(fmt::format("{}: step {}, but the directory is named {}", name, manifest_->step,
                          BaseName(dir_)));
    }
  }

  // Checks a listed file against its entry in the directory; true when its size matches.
  template <typename Report>
  bool CheckListedFile(const FileRecord& f, const DirEntry* e, Report&& problem) {
    if (e == nullptr) {
      problem(fmt::format("{}: missing (evenkeel-checkpoint.json lists it with {} bytes)", f.name,
                          f.size));
    } else if (!e->regular) {
      problem(fmt::format("{}: not a regular file", f.name));
    } else if (e->size < f.size) {
      problem(
          fmt::format("{}: truncated: file ends at byte {}, evenkeel-checkpoint.json records {} "
                      "bytes",
                      f.name, e->size, f.size));
    } else if (e->size > f.size) {
      problem(fmt::format(
          "{}: {} bytes, evenkeel-checkpoint.json records {} (extra bytes from byte {})", f.name,
          e->size, f.size, f.size));
    } else {
      return true;
    }
    return false;
  }

  static bool InTrainState(std::string_view name) {
    return name.size() > kTrainStateDir.size() && name.starts_with(kTrainStateDir) &&
           name[kTrainStateDir.size()] == '/';
  }

  void CheckManifestFiles() {
    std::set<std::string> listed;
    for (const FileRecord& f : manifest_->files) {
      if (InTrainState(f.name)) continue;  // CheckTrainState's
      listed.insert(f.name);
      if (CheckListedFile(f, Find(f.name), [this](std::string p) { Problem(std::move(p)); })) {
        sized_ok_.insert(f.name);
      }
    }
    for (const auto& [name, e] : files_) {
      if (name == kManifestName || listed.count(name)) continue;
      if (name == kTrainStateDir && e.directory) {
        if (manifest_->train_state) continue;  // CheckTrainState's
        Problem(fmt::format("{}: a subdirectory, but evenkeel-checkpoint.json has no train_state",
                            name));
        continue;
      }
      Problem(fmt::format("{}: not listed in evenkeel-checkpoint.json", name));
    }
    dtype_ = SafetensorsDtypeFor(manifest_->dtype);
    if (dtype_.empty()) {
      Problem(fmt::format("{}: dtype {} unknown (bfloat16, float16, float32)", kManifestName,
                          Quoted(manifest_->dtype)));
    }
  }

  // Reads the index into `index`; false (with a problem) when unusable.
  bool ReadIndex(const std::string& name, Index* index) {
    auto text = ReadFile(dir_ + "/" + name);
    if (!text.ok()) {
      Problem(text.status().message());
      return false;
    }
    simdjson::dom::parser parser;
    simdjson::padded_string padded(*text);
    simdjson::dom::element root;
    if (auto err = parser.parse(padded).get(root)) {
      std::string where = LocateJsonError(*text);
      Problem(fmt::format("{}: malformed JSON: {}", name,
                          where.empty() ? simdjson::error_message(err) : where));
      return false;
    }
    // Extra fields are fine; weight_map (tensor -> shard) and
    // metadata.total_size are checked: the error names the field.
    auto fields = JsonFields::Root(root, name);
    JsonFields wm = fields.ok() ? *fields : JsonFields(root, name);
    Status st = fields.ok() ? fields->Object("weight_map", &wm) : fields.status();
    if (!st.ok()) {
      Problem(st.message());  // "model.safetensors.index.json: weight_map: not an object"
      return false;
    }
    std::set<std::string_view> seen;
    for (std::string_view tensor : wm.Keys()) {
      std::string s;
      if (st = wm.Str(tensor, &s); !st.ok()) {
        Problem(st.message());  // "model.safetensors.index.json: weight_map.lm_head.weight: not a
                                // string"
        return false;
      }
      if (!seen.insert(tensor).second) {
        Problem(fmt::format("{}: weight_map: tensor {} listed twice", name, Quoted(tensor)));
        return false;
      }
      if (!PlainName(s) || !s.ends_with(kSafetensorsExt)) {
        Problem(fmt::format(
            "{}: weight_map: tensor {}: shard {} is not a .safetensors file in this directory",
            name, Quoted(tensor), Quoted(s)));
        return false;
      }
      index->weight_map.emplace_back(std::string(tensor), std::move(s));
    }
    JsonFields metadata = *fields;
    if (fields->Has("metadata")) {
      st = fields->Object("metadata", &metadata);
      if (st.ok() && metadata.Has("total_size")) {
        uint64_t v = 0;
        st = metadata.U64("total_size", &v);
        if (st.ok()) index->total_size = v;
      } else if (st.ok() && manifest_) {
        st = metadata.Err("total_size", "missing");
      }
    } else if (manifest_) {
      st = CorruptError(fmt::format("{}: metadata.total_size: missing", name));
    }
    if (!st.ok()) Problem(st.message());
    return true;
  }

  // Parses each shard's header; records its tensors in `where` (tensor ->
  // shard) and problems for tensors in two shards or of the wrong dtype.
  // Returns the tensors' bytes; `all_read` false when a shard was unusable.
  uint64_t ReadShards(const std::vector<std::string>& shards, const std::string& referrer,
                      std::map<std::string, std::string>* where,
                      std::map<std::string, uint64_t>* offsets, std::set<std::string>* usable,
                      bool* all_read) {
    uint64_t bytes = 0;
    *all_read = true;
    for (const std::string& shard : shards) {
      const DirEntry* e = Find(shard);
      if (e == nullptr) {
        Problem(referrer.empty() ? fmt::format("{}: missing", shard)
                                 : fmt::format("{}: shard {} missing", referrer, shard));
        *all_read = false;
        continue;
      }
      auto h = ReadSafetensorsHeader(dir_ + "/" + shard, shard);
      if (!h.ok()) {
        Problem(h.status().message());
        *all_read = false;
        continue;
      }
      usable->insert(shard);
      report_.shard_count++;
      report_.tensor_count += h->tensors.size();
      size_t wrong_dtype = 0;
      const TensorInfo* first_wrong = nullptr;
      for (const TensorInfo& t : h->tensors) {
        bytes += t.bytes();
        if (!dtype_.empty() && t.dtype != dtype_ && wrong_dtype++ == 0) first_wrong = &t;
        auto [it, inserted] = where->emplace(t.name, shard);
        if (!inserted) {
          Problem(fmt::format("{}: byte {}: tensor {} is also in {}", shard, t.header_offset,
                              Quoted(t.name), it->second));
        } else {
          (*offsets)[t.name] = t.header_offset;
        }
      }
      if (first_wrong != nullptr) {
        Problem(fmt::format(
            "{}: byte {}: tensor {} is {}, the checkpoint declares {} ({}){}", shard,
            first_wrong->header_offset, Quoted(first_wrong->name), first_wrong->dtype,
            manifest_->dtype, dtype_,
            wrong_dtype > 1 ? fmt::format("; {} tensors of this shard differ", wrong_dtype) : ""));
      }
    }
    return bytes;
  }

  void CheckWeights() {
    std::vector<std::string> indexes, safetensors;
    for (const auto& [name, e] : files_) {
      if (!e.regular) continue;
      if (name.ends_with(kIndexExt)) indexes.push_back(name);
      if (name.ends_with(kSafetensorsExt)) safetensors.push_back(name);
    }
    if (indexes.size() > 1) {
      Problem(fmt::format("more than one safetensors index ({}, {})", indexes[0], indexes[1]));
      return;
    }
    if (indexes.empty()) {
      CheckSingleFile(safetensors);
      return;
    }
    const std::string& index_name = indexes[0];
    Index index;
    if (!ReadIndex(index_name, &index)) return;
    std::vector<std::string> shards;
    for (const auto& [tensor, shard] : index.weight_map) shards.push_back(shard);
    std::sort(shards.begin(), shards.end());
    shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
    std::map<std::string, std::string> where;
    std::map<std::string, uint64_t> offsets;
    std::set<std::string> usable;
    bool all_read = false;
    uint64_t bytes = ReadShards(shards, index_name, &where, &offsets, &usable, &all_read);
    // The index and the shards' headers must agree tensor by tensor.
    std::set<std::string_view> indexed;
    for (const auto& [tensor, shard] : index.weight_map) {
      indexed.insert(tensor);
      auto it = where.find(tensor);
      if (it == where.end()) {
        if (usable.count(shard)) {
          Problem(fmt::format("{}: tensor {} is not in {}", index_name, Quoted(tensor), shard));
        }
      } else if (it->second != shard) {
        Problem(fmt::format("{}: byte {}: tensor {} is here, but {} says {}", it->second,
                            offsets[tensor], Quoted(tensor), index_name, shard));
      }
    }
    for (const auto& [tensor, shard] : where) {
      if (!indexed.count(tensor)) {
        Problem(fmt::format("{}: byte {}: tensor {} is not in {}", shard, offsets[tensor],
                            Quoted(tensor), index_name));
      }
    }
    if (all_read && index.total_size && *index.total_size != bytes) {
      Problem(fmt::format("{}: metadata.total_size is {}, but the shards' tensors hold {} bytes",
                          index_name, *index.total_size, bytes));
    }
    std::set<std::string> named(shards.begin(), shards.end());
    for (const auto& s : safetensors) {
      if (!named.count(s)) Problem(fmt::format("{}: not named in {}", s, index_name));
    }
  }

  // No index: the weights must be one model.safetensors.
  void CheckSingleFile(const std::vector<std::string>& safetensors) {
    const std::string single = "model.safetensors";
    if (!Find(single)) {
      if (safetensors.empty()) {
        Problem("no weights: neither model.safetensors nor model.safetensors.index.json");
      } else {
        Problem(fmt::format("no model.safetensors.index.json for {} safetensors files ({}, ...)",
                            safetensors.size(), safetensors[0]));
      }
      return;
    }
    std::map<std::string, std::string> where;
    std::map<std::string, uint64_t> offsets;
    std::set<std::string> usable;
    bool all_read = false;
    (void)ReadShards({single}, "", &where, &offsets, &usable, &all_read);
    for (const auto& s : safetensors) {
      if (s != single) Problem(fmt::format("{}: a second safetensors file, but no index", s));
    }
  }

  // The training state (format 2): the directory train_state.dir, each listed
  // file there with its size, DCP's .metadata and at least one *.distcp
  // listed, nothing unlisted; at kFull every byte re-hashed. Its problems go to
  // train_state_problems as well as problems; the weights' verdict stands apart.
  void CheckTrainState() {
    const TrainStateRef& ts = *manifest_->train_state;
    report_.has_train_state = true;
    report_.train_state_world = ts.world;
    const DirEntry* sub = Find(ts.dir);
    if (sub == nullptr || !sub->directory) {
      StateProblem(fmt::format("{}: {} (evenkeel-checkpoint.json's train_state names it)", ts.dir,
                               sub == nullptr ? "missing" : "not a directory"));
      return;
    }
    if (!state_listed_) {
      StateProblem(fmt::format("{}: cannot be listed", ts.dir));
      return;
    }
    const std::string metadata = ts.dir + "/" + std::string(kTrainStateMetadata);
    std::set<std::string> listed;
    std::set<std::string> sized_ok;
    int shards = 0;
    for (const FileRecord& f : manifest_->files) {
      if (!InTrainState(f.name)) continue;
      listed.insert(f.name);
      if (f.name.ends_with(kTrainStateShardExt)) ++shards;
      auto it = state_files_.find(f.name);
      const DirEntry* e = it == state_files_.end() ? nullptr : &it->second;
      if (CheckListedFile(f, e, [this](std::string p) { StateProblem(std::move(p)); })) {
        sized_ok.insert(f.name);
      }
    }
    if (!listed.count(metadata)) {
      StateProblem(fmt::format("{}: not listed in evenkeel-checkpoint.json ({} requires it)",
                               metadata, kTrainStateFormat));
    }
    if (shards == 0) {
      StateProblem(fmt::format("{}: no *{} file listed in evenkeel-checkpoint.json", ts.dir,
                               kTrainStateShardExt));
    }
    for (const auto& [name, e] : state_files_) {
      if (listed.count(name)) continue;
      StateProblem(e.regular ? fmt::format("{}: not listed in evenkeel-checkpoint.json", name)
                             : fmt::format("{}: not a regular file", name));
    }
    if (options_.level == VerifyLevel::kFull) CheckHashes(sized_ok, true);
  }

  // Re-hashes each listed file of the right size (`sized_ok`); names the first
  // chunk whose hash differs as a byte range.
  void CheckHashes(const std::set<std::string>& sized_ok, bool train_state) {
    std::vector<const FileRecord*> todo;
    for (const FileRecord& f : manifest_->files) {
      if (sized_ok.count(f.name)) todo.push_back(&f);
    }
    std::vector<std::string> found(todo.size());
    RunParallel(todo.size(), options_.threads, [&](size_t i) {
      const FileRecord& want = *todo[i];
      FileRecord got;
      Status st = HashFileChunks(dir_ + "/" + want.name, want.chunk_bytes, &got);
      if (!st.ok()) {
        found[i] = st.message();
        return;
      }
      for (size_t k = 0; k < want.chunks.size() && k < got.chunks.size(); ++k) {
        if (want.chunks[k] != got.chunks[k]) {
          uint64_t begin = k * want.chunk_bytes;
          uint64_t end = std::min(begin + want.chunk_bytes, got.size) - 1;
          found[i] = fmt::format("{}: checksum mismatch in bytes {}-{}", want.name, begin, end);
          return;
        }
      }
      if (got.size != want.size || got.chunks.size() != want.chunks.size()) {
        found[i] = fmt::format("{}: changed while verifying ({} bytes, expected {})", want.name,
                               got.size, want.size);
      } else if (got.xxh3 != want.xxh3) {
        found[i] =
            fmt::format("{}: whole-file checksum mismatch although every chunk matches", want.name);
      }
    });
    for (auto& p : found) {
      if (p.empty()) continue;
      if (train_state) {
        StateProblem(std::move(p));
      } else {
        Problem(std::move(p));
      }
    }
  }

  const std::string& dir_;
  const VerifyOptions& options_;
  VerifyReport report_;
  size_t problems_ = 0;
  size_t weight_problems_ = 0;  // problems_ before the training state's were added
  size_t state_problems_ = 0;
  std::map<std::string, DirEntry> files_;
  // The training state directory's entries, named "train_state/NAME".
  std::map<std::string, DirEntry> state_files_;
  bool state_listed_ = false;
  std::optional<CheckpointManifest> manifest_;
  std::string dtype_;               // safetensors dtype every tensor must have; "" = any
  std::set<std::string> sized_ok_;  // listed files whose size matches the manifest
};

}  // namespace

Result<VerifyReport> VerifyCheckpoint(const std::string& dir, const VerifyOptions& options) {
  return Verifier(dir, options).Run();
}

Result<VerifyReport> VerifyCheckpoint(const std::string& dir, VerifyLevel level) {
  VerifyOptions options;
  options.level = level;
  return VerifyCheckpoint(dir, options);
}

}  // namespace ek::ckpt
