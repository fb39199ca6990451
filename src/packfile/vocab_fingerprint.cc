#include "packfile/vocab_fingerprint.h"

#include <fmt/core.h>
#include <simdjson.h>
#include <xxhash.h>

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/byte_level.h"
#include "core/file.h"
#include "core/json_check.h"

namespace ek::pack {

namespace {

using simdjson::dom::element;

std::string TypeOf(element e) {
  if (!e.is_object()) return "";
  std::string_view t;
  if (e["type"].get(t) != simdjson::SUCCESS) return "";
  return std::string(t);
}

class VocabReader {
 public:
  explicit VocabReader(std::string_view name) : name_(name) {}

  Result<uint64_t> Run(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json);
    element root;
    if (auto err = parser.parse(padded).get(root); err) {
      std::string where = LocateJsonError(json);
      if (where.empty()) where = simdjson::error_message(err);
      return Err("", "malformed JSON: " + where);
    }
    if (!root.is_object()) return Err("", "not a tokenizer.json: the top level is not an object");
    element model;
    if (root["model"].get(model) != simdjson::SUCCESS || !model.is_object()) {
      return Err("model", "missing: not a tokenizer.json");
    }
    element d;
    if (root["decoder"].get(d) != simdjson::SUCCESS || d.is_null()) {
      join_with_space_ = true;
    } else if (std::string type = TypeOf(d); type != "ByteLevel") {
      return Unsupported("decoder", "'" + type + "' (supported: ByteLevel)");
    }
    EK_RETURN_IF_ERROR(ReadVocab(model));
    EK_RETURN_IF_ERROR(ReadAddedTokens(root));
    return Hash();
  }

 private:
  struct Added {
    int32_t id = 0;
    std::string content;
  };

  Status Err(std::string_view where, std::string what) const {
    if (where.empty()) return InvalidArgumentError(fmt::format("{}: {}", name_, what));
    return InvalidArgumentError(fmt::format("{}: {}: {}", name_, where, what));
  }
  Status Unsupported(std::string_view where, std::string what) const {
    return UnsupportedError(fmt::format("{}: {}: unsupported: {}", name_, where, what));
  }

  Status ReadVocab(element model) {
    std::string type = TypeOf(model);
    if (!type.empty() && type != "BPE") {
      return Unsupported("model.type", "'" + type + "' (only byte-level BPE is supported)");
    }
    simdjson::dom::object vocab;
    if (model["vocab"].get(vocab) != simdjson::SUCCESS)
      return Err("model.vocab", "missing or not an object");
    int64_t max_id = -1, count = 0;
    for (auto field : vocab) {
      int64_t id;
      if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 30)) {
        return Err(fmt::format("model.vocab[{}]", field.key.substr(0, 40)),
                   "id is not a non-negative integer");
      }
      max_id = std::max(max_id, id);
      ++count;
    }
    if (max_id >= 2 * count + 65536) {
      return Err("model.vocab", fmt::format("ids are too sparse: the largest is {} for {} entries",
                                            max_id, count));
    }
    const size_t n = static_cast<size_t>(max_id + 1);
    tokens_.assign(n, std::string());
    present_.assign(n, false);
    has_id_.assign(n, false);
    for (auto field : vocab) {
      size_t i = static_cast<size_t>(field.value.get_int64().value_unsafe());
      has_id_[i] = true;
      if (ByteLevelToBytes(field.key, &tokens_[i])) {
        present_[i] = true;
      } else {
        override_[static_cast<int32_t>(i)] = std::string(field.key);
        tokens_[i].clear();
      }
      if (join_with_space_) raw_text_[static_cast<int32_t>(i)] = std::string(field.key);
    }
    std::unordered_set<std::string_view> keys;
    keys.reserve(n);
    for (auto field : vocab) keys.insert(field.key);
    model_vocab_len_ = static_cast<int64_t>(keys.size());
    // The raw-byte vocabulary an added token's content is looked up in (the
    // tokenizer's BpeModel::Find: present entries only).
    for (size_t i = 0; i < n; ++i) {
      if (present_[i]) by_bytes_.emplace(tokens_[i], static_cast<int32_t>(i));
    }
    vocab_size_ = static_cast<int32_t>(n);
    return Status::Ok();
  }

  Status ReadAddedTokens(element root) {
    element v;
    if (root["added_tokens"].get(v) != simdjson::SUCCESS || v.is_null()) return Status::Ok();
    simdjson::dom::array arr;
    if (v.get(arr) != simdjson::SUCCESS) return Err("added_tokens", "not an array");
    std::vector<Added> listed;
    size_t i = 0;
    for (element e : arr) {
      std::string where = fmt::format("added_tokens[{}]", i++);
      int64_t id;
      std::string_view content;
      if (e["id"].get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 30))
        return Err(where, "bad id");
      if (e["content"].get(content) != simdjson::SUCCESS) return Err(where, "bad content");
      listed.push_back({static_cast<int32_t>(id), std::string(content)});
    }
    // Hugging Face's id assignment (AddedVocabulary::add_tokens, in file order),
    // as the tokenizer's loader does it: content already added keeps its id;
    // content that is a model vocabulary entry takes that entry's id; anything
    // else max(added ids) + 1, or the model's vocabulary size when no added id
    // reaches it.
    std::unordered_map<std::string, int32_t> non_byte_level_keys;
    for (const auto& [id, key] : override_) non_byte_level_keys.emplace(key, id);
    std::unordered_map<std::string, size_t> by_content;
    int64_t max_added = -1;
    std::string bytes;
    for (Added a : listed) {
      if (a.content.empty()) continue;
      if (auto it = by_content.find(a.content); it != by_content.end()) {
        a.id = added_[it->second].id;
        added_[it->second] = a;
        continue;
      }
      int32_t model_id = -1;
      if (ByteLevelToBytes(a.content, &bytes)) {
        if (auto b = by_bytes_.find(bytes); b != by_bytes_.end()) model_id = b->second;
      } else if (auto k = non_byte_level_keys.find(a.content); k != non_byte_level_keys.end()) {
        model_id = k->second;
      }
      if (model_id >= 0) {
        a.id = model_id;
      } else if (max_added < 0 || (max_added < model_vocab_len_ && model_vocab_len_ != 0)) {
        a.id = static_cast<int32_t>(model_vocab_len_);
      } else {
        a.id = static_cast<int32_t>(max_added + 1);
      }
      max_added = std::max<int64_t>(max_added, a.id);
      by_content.emplace(a.content, added_.size());
      added_.push_back(std::move(a));
    }
    int32_t limit = vocab_size_;
    for (const Added& a : added_) limit = std::max(limit, a.id + 1);
    has_id_.resize(static_cast<size_t>(limit), false);
    for (const Added& a : added_) {
      std::string decoded;
      override_[a.id] = ByteLevelToBytes(a.content, &decoded) ? decoded : a.content;
      if (join_with_space_) raw_text_[a.id] = a.content;
      has_id_[static_cast<size_t>(a.id)] = true;
    }
    vocab_size_ = limit;
    return Status::Ok();
  }

  // Tokenizer::VocabFingerprint over what Decode gives for each id alone.
  uint64_t Hash() const {
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    for (int32_t id = 0; id < vocab_size_; ++id) {
      if (!has_id_[static_cast<size_t>(id)]) continue;
      const std::string* bytes = nullptr;
      if (join_with_space_) {
        auto it = raw_text_.find(id);
        if (it == raw_text_.end()) continue;
        bytes = &it->second;
      } else if (auto it = override_.find(id); it != override_.end()) {
        bytes = &it->second;
      } else {
        bytes = &tokens_[static_cast<size_t>(id)];
      }
      const uint32_t head[2] = {static_cast<uint32_t>(id), static_cast<uint32_t>(bytes->size())};
      XXH3_64bits_update(state, head, sizeof head);
      XXH3_64bits_update(state, bytes->data(), bytes->size());
    }
    uint64_t h = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    return h;
  }

  std::string name_;
  bool join_with_space_ = false;
  std::vector<std::string> tokens_;  // raw bytes of byte-level entries, by id
  std::vector<bool> present_;        // tokens_[id] is a byte-level entry's bytes
  std::vector<bool> has_id_;
  std::unordered_map<int32_t, std::string> override_;  // non-byte-level entries, added tokens
  std::unordered_map<int32_t, std::string> raw_text_;  // only with no decoder
  std::unordered_map<std::string, int32_t> by_bytes_;
  std::vector<Added> added_;
  int64_t model_vocab_len_ = 0;
  int32_t vocab_size_ = 0;
};

}  // namespace

Result<uint64_t> VocabFingerprintOfJson(std::string_view json, std::string_view name) {
  VocabReader reader(name);
  return reader.Run(json);
}

Result<uint64_t> VocabFingerprintOfFile(const std::string& path) {
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  return VocabFingerprintOfJson(f.data(), path);
}

}  // namespace ek::pack
