#include "tokjson/document.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/json_check.h"
#include "tokjson/byte_level.h"

namespace ek::tokjson {

namespace {

using simdjson::dom::element;

// An id beyond this is refused before anything is sized by it.
constexpr int64_t kMaxId = int64_t{1} << 30;

std::string KeyForError(std::string_view k) { return std::string(k.substr(0, 40)); }

}  // namespace

std::string TypeOf(element e) {
  if (!e.is_object()) return "";
  std::string_view t;
  if (e["type"].get(t) != simdjson::SUCCESS) return "";
  return std::string(t);
}

Status FieldError(std::string_view file, std::string_view where, std::string_view what) {
  if (where.empty()) return InvalidArgumentError(fmt::format("{}: {}", file, what));
  return InvalidArgumentError(fmt::format("{}: {}: {}", file, where, what));
}

Status UnsupportedField(std::string_view file, std::string_view where, std::string_view what) {
  return UnsupportedError(fmt::format("{}: {}: unsupported: {}", file, where, what));
}

Status Document::Error(std::string_view where, std::string_view what) const {
  return FieldError(name_, where, what);
}

Status Document::Unsupported(std::string_view where, std::string_view what) const {
  return UnsupportedField(name_, where, what);
}

Result<Document> Document::Parse(std::string_view json, std::string_view name, size_t readable) {
  Document doc;
  doc.name_ = std::string(name);
  doc.parser_ = std::make_unique<simdjson::dom::parser>();
  {
    const bool in_place = !json.empty() && readable >= json.size() + simdjson::SIMDJSON_PADDING;
    simdjson::padded_string copy;
    if (!in_place) copy = simdjson::padded_string(json);
    simdjson::padded_string_view padded =
        in_place ? simdjson::padded_string_view(json.data(), json.size(), readable)
                 : simdjson::padded_string_view(copy);
    if (auto err = doc.parser_->parse(padded).get(doc.root_); err) {
      std::string where = LocateJsonError(json);
      if (where.empty()) where = simdjson::error_message(err);
      return doc.Error("", "malformed JSON: " + where);
    }
  }
  if (!doc.root_.is_object()) {
    return doc.Error("", "not a tokenizer.json: the top level is not an object");
  }
  if (doc.root_["model"].get(doc.model_) != simdjson::SUCCESS || !doc.model_.is_object()) {
    return doc.Error("model", "missing: not a tokenizer.json");
  }
  element d;
  if (doc.root_["decoder"].get(d) != simdjson::SUCCESS || d.is_null()) {
    doc.decoder = Decoder::kNone;
  } else if (TypeOf(d) == "ByteLevel") {
    doc.decoder = Decoder::kByteLevel;
  } else {
    EK_RETURN_IF_ERROR(doc.CheckPieceDecoder(d, "decoder"));
    doc.decoder = Decoder::kPieces;
  }
  std::string type = TypeOf(doc.model_);
  if (!type.empty() && type != "BPE") {
    return doc.Unsupported("model.type", "'" + type + "' (only BPE is supported)");
  }
  EK_RETURN_IF_ERROR(doc.ReadVocab());
  EK_RETURN_IF_ERROR(doc.ReadAddedTokens());
  return doc;
}

Status Document::CheckPieceDecoder(element d, const std::string& where) const {
  const std::string type = TypeOf(d);
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (d["decoders"].get(list) != simdjson::SUCCESS) {
      return Error(where + ".decoders", "missing or not an array");
    }
    size_t i = 0;
    for (element e : list) {
      EK_RETURN_IF_ERROR(CheckPieceDecoder(e, fmt::format("{}.decoders[{}]", where, i++)));
    }
    return Status::Ok();
  }
  for (const char* known : {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace"}) {
    if (type == known) return Status::Ok();
  }
  return Unsupported(where, "'" + type +
                                "' (supported: ByteLevel; or Replace, ByteFallback, Fuse, Strip, "
                                "Metaspace and a Sequence of these)");
}

namespace {

// How many distinct keys `object` has (a JSON object may repeat one): an open-addressing
// set of 8-byte slots (a key's place in the object + 1, 0 for none, beside 32 bits of its
// hash), a slot whose hash bits match compared by the key's bytes; no allocation per key.
// (Slots of 32 bytes at twice the count made 16 MB of fresh memory for Qwen3's 151,643
// keys, now 2 MB and the keys' views; fresh memory is slow to fault in on virtual machines.)
size_t DistinctKeys(simdjson::dom::object object, size_t count) {
  std::vector<std::string_view> keys;
  keys.reserve(count);
  size_t cap = 16;
  while (cap < count + count / 2 + 1) cap <<= 1;
  std::vector<uint64_t> slots(cap, 0);
  size_t distinct = 0;
  for (auto field : object) {
    const uint64_t h = XXH3_64bits(field.key.data(), field.key.size());
    const auto tag = static_cast<uint32_t>(h >> 32);
    size_t pos = h & (cap - 1);
    bool seen = false;
    for (; slots[pos] != 0; pos = (pos + 1) & (cap - 1)) {
      if (static_cast<uint32_t>(slots[pos]) == tag && keys[(slots[pos] >> 32) - 1] == field.key) {
        seen = true;
        break;
      }
    }
    keys.push_back(field.key);
    if (!seen) {
      slots[pos] = (static_cast<uint64_t>(keys.size()) << 32) | tag;
      ++distinct;
    }
  }
  return distinct;
}

}  // namespace

Status Document::ReadVocab() {
  simdjson::dom::object vocab;
  if (model_["vocab"].get(vocab) != simdjson::SUCCESS) {
    return Error("model.vocab", "missing or not an object");
  }
  // Ids first, to size the tables.
  int64_t max_id = -1, count = 0;
  for (auto field : vocab) {
    int64_t id;
    if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > kMaxId) {
      return Error(fmt::format("model.vocab[{}]", KeyForError(field.key)),
                   "id is not a non-negative integer");
    }
    max_id = std::max(max_id, id);
    ++count;
  }
  // The tables are indexed by id, so their size must follow the file's: real
  // vocabularies are dense (0..n-1). One stray id near 2^30 in a 5 KB file
  // asked for 32 GB (fuzz_tokenizer); a few holes are fine.
  if (max_id >= 2 * count + 65536) {
    return Error("model.vocab", fmt::format("ids are too sparse: the largest is {} for {} entries",
                                            max_id, count));
  }
  const size_t n = static_cast<size_t>(max_id + 1);
  vocab_bytes.assign(n, std::string());
  vocab_byte_level.assign(n, false);
  vocab_key.assign(n, std::string_view());
  has_id.assign(n, false);
  for (auto field : vocab) {
    const size_t i = static_cast<size_t>(field.value.get_int64().value_unsafe());
    has_id[i] = true;
    vocab_key[i] = field.key;
    if (ByteLevelToBytes(field.key, &vocab_bytes[i])) {
      vocab_byte_level[i] = true;
    } else {
      // Not reachable by byte-level BPE; decoded as Hugging Face's ByteLevel decoder does.
      if (!simdjson::validate_utf8(field.key.data(), field.key.size())) {
        return Error("model.vocab", fmt::format("key for id {} is not valid UTF-8", i));
      }
      vocab_other[static_cast<int32_t>(i)] = std::string(field.key);
      vocab_bytes[i].clear();
    }
  }
  vocab_len = static_cast<int64_t>(DistinctKeys(vocab, static_cast<size_t>(count)));
  in_vocab = has_id;
  vocab_limit = static_cast<int32_t>(n);
  id_limit = vocab_limit;
  return Status::Ok();
}

Status Document::ReadAddedTokens() {
  element v;
  if (root_["added_tokens"].get(v) != simdjson::SUCCESS || v.is_null()) return Status::Ok();
  simdjson::dom::array arr;
  if (v.get(arr) != simdjson::SUCCESS) return Error("added_tokens", "not an array");
  std::vector<AddedToken> listed;
  listed.reserve(arr.size());
  size_t i = 0;
  for (element e : arr) {
    std::string where = fmt::format("added_tokens[{}]", i++);
    AddedToken t;
    int64_t id;
    std::string_view content;
    if (e["id"].get(id) != simdjson::SUCCESS || id < 0 || id > kMaxId) {
      return Error(where, "bad id");
    }
    if (e["content"].get(content) != simdjson::SUCCESS) return Error(where, "bad content");
    t.id = static_cast<int32_t>(id);
    t.content = std::string(content);
    for (auto [key, out] :
         {std::pair{"special", &t.special}, std::pair{"single_word", &t.single_word},
          std::pair{"lstrip", &t.lstrip}, std::pair{"rstrip", &t.rstrip},
          std::pair{"normalized", &t.normalized}}) {
      element f;
      if (e[key].get(f) != simdjson::SUCCESS || f.is_null()) continue;
      if (f.get(*out) != simdjson::SUCCESS) return Error(where + "." + key, "not a bool");
    }
    listed.push_back(std::move(t));
  }

  // The vocabulary ids the listed contents could take: a byte-level content's
  // bytes are looked up among the byte-level entries (the lowest id wins, as
  // in the tokenizer's vocabulary map), any other content among the keys
  // outside the alphabet (the first in vocab_other's order). One pass over the
  // vocabulary for the few contents, hashing only an entry of a length some
  // content has (Gemma: 6,415 contents, 262,144 entries).
  std::unordered_map<std::string, int32_t> by_bytes;  // content's bytes -> id (-1: none)
  std::unordered_map<std::string, int32_t> by_other;  // other content -> id (-1: none)
  std::vector<char> bytes_len, other_len;             // [length]: a content has it
  auto mark = [](std::vector<char>* lens, size_t len) {
    if (lens->size() <= len) lens->resize(len + 1, 0);
    (*lens)[len] = 1;
  };
  auto asked = [](const std::vector<char>& lens, size_t len) {
    return len < lens.size() && lens[len];
  };
  std::string bytes;
  for (const AddedToken& a : listed) {
    if (a.content.empty()) continue;
    if (ByteLevelToBytes(a.content, &bytes)) {
      by_bytes.emplace(bytes, -1);
      mark(&bytes_len, bytes.size());
    } else {
      by_other.emplace(a.content, -1);
      mark(&other_len, a.content.size());
    }
  }
  if (!by_bytes.empty()) {
    for (size_t id = 0; id < vocab_bytes.size(); ++id) {
      if (!vocab_byte_level[id] || !asked(bytes_len, vocab_bytes[id].size())) continue;
      auto it = by_bytes.find(vocab_bytes[id]);
      if (it != by_bytes.end() && it->second < 0) it->second = static_cast<int32_t>(id);
    }
  }
  if (!by_other.empty()) {
    for (const auto& [id, key] : vocab_other) {
      if (!asked(other_len, key.size())) continue;
      auto it = by_other.find(key);
      if (it != by_other.end() && it->second < 0) it->second = id;
    }
  }

  std::unordered_map<std::string, size_t> by_content;  // -> index in added_tokens
  int64_t max_added = -1;
  for (AddedToken& a : listed) {
    if (a.content.empty()) continue;
    if (auto it = by_content.find(a.content); it != by_content.end()) {
      a.id = added_tokens[it->second].id;
      added_tokens[it->second] = std::move(a);
      continue;
    }
    int32_t model_id = -1;
    if (ByteLevelToBytes(a.content, &bytes)) {
      model_id = by_bytes.find(bytes)->second;  // every byte-level content is a key
    } else {
      model_id = by_other.find(a.content)->second;  // every other content is a key
    }
    if (model_id >= 0) {
      a.id = model_id;
    } else if (max_added < 0 || (max_added < vocab_len && vocab_len != 0)) {
      a.id = static_cast<int32_t>(vocab_len);
    } else {
      a.id = static_cast<int32_t>(max_added + 1);
    }
    max_added = std::max<int64_t>(max_added, a.id);
    by_content.emplace(a.content, added_tokens.size());
    added_tokens.push_back(std::move(a));
  }
  for (const AddedToken& a : added_tokens) id_limit = std::max(id_limit, a.id + 1);
  has_id.resize(static_cast<size_t>(id_limit), false);
  for (const AddedToken& a : added_tokens) has_id[static_cast<size_t>(a.id)] = true;
  return Status::Ok();
}

Result<std::vector<std::pair<int32_t, int32_t>>> ReadMerges(const Document& doc,
                                                            const FindManyFn& find_many,
                                                            bool byte_level) {
  simdjson::dom::array merges;
  if (doc.model()["merges"].get(merges) != simdjson::SUCCESS) {
    return doc.Error("model.merges", "missing or not an array");
  }
  std::vector<std::pair<int32_t, int32_t>> pairs;
  pairs.reserve(merges.size());
  // Merges are parsed a chunk at a time and their tokens looked up together; the
  // errors are the same, in the same order, as one merge at a time.
  constexpr size_t kChunk = 64;
  struct Pending {
    std::string_view a, b;      // as written
    bool ok[2] = {true, true};  // byte-level: the side is a byte-level string
  };
  std::vector<Pending> pending;
  pending.reserve(kChunk);
  std::string raw, side;     // byte-level: every side's raw bytes, back to back
  std::vector<size_t> ends;  // byte-level: where each side ends in `raw`
  std::vector<std::string_view> keys;
  std::vector<int32_t> ids;
  auto resolve = [&]() -> Status {
    keys.clear();
    for (size_t j = 0; j < pending.size(); ++j) {
      if (byte_level) {
        for (size_t k = 2 * j; k < 2 * j + 2; ++k) {
          const size_t start = k == 0 ? 0 : ends[k - 1];
          keys.push_back(std::string_view(raw).substr(start, ends[k] - start));
        }
      } else {
        keys.push_back(pending[j].a);
        keys.push_back(pending[j].b);
      }
    }
    ids.resize(keys.size());
    find_many(keys.data(), keys.size(), ids.data());
    for (size_t j = 0; j < pending.size(); ++j) {
      const int32_t ia = pending[j].ok[0] ? ids[2 * j] : -1;
      const int32_t ib = pending[j].ok[1] ? ids[2 * j + 1] : -1;
      if (ia < 0 || ib < 0) {
        return doc.Error(fmt::format("model.merges[{}]", pairs.size()),
                         fmt::format("token '{}' is not {} in model.vocab",
                                     ia < 0 ? std::string(pending[j].a) : std::string(pending[j].b),
                                     byte_level ? "a byte-level token" : "a token"));
      }
      pairs.emplace_back(ia, ib);
    }
    pending.clear();
    raw.clear();
    ends.clear();
    return Status::Ok();
  };
  size_t idx = 0;
  for (element m : merges) {
    std::string_view a, b;
    Status bad;
    if (m.is_string()) {
      std::string_view s = m.get_string().value_unsafe();
      size_t sp = s.find(' ');
      if (sp == std::string_view::npos) {
        bad = doc.Error(fmt::format("model.merges[{}]", idx), "no space in merge");
      } else {
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      }
    } else if (m.is_array()) {
      simdjson::dom::array pair = m.get_array().value_unsafe();
      std::string_view* half_of[2] = {&a, &b};
      size_t k = 0;
      for (element half : pair) {
        if (k == 2 || half.get(*half_of[k]) != simdjson::SUCCESS) break;
        ++k;
      }
      if (k != 2 || pair.size() != 2) {
        bad = doc.Error(fmt::format("model.merges[{}]", idx), "not a pair of strings");
      }
    } else {
      bad = doc.Error(fmt::format("model.merges[{}]", idx), "not a string or a pair");
    }
    if (!bad.ok()) {
      EK_RETURN_IF_ERROR(resolve());  // an earlier merge's unknown token comes first
      return bad;
    }
    Pending p{a, b};
    if (byte_level) {
      for (int k = 0; k < 2; ++k) {
        p.ok[k] = ByteLevelToBytes(k == 0 ? a : b, &side);
        if (p.ok[k]) raw += side;
        ends.push_back(raw.size());
      }
    }
    pending.push_back(p);
    ++idx;
    if (pending.size() == kChunk) EK_RETURN_IF_ERROR(resolve());
  }
  EK_RETURN_IF_ERROR(resolve());
  return pairs;
}

}  // namespace ek::tokjson
