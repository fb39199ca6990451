#include "tokjson/document.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/huge_pages.h"
#include "core/json_check.h"
#include "core/prefetch.h"
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

// Sizes the parser for a document of `bytes` (as its parse would) and advises its three
// large buffers, the tape, the strings and the structural indexes (~23 MB written for
// Llama 3's tokenizer.json), to be backed by transparent huge pages: a few dozen huge-page
// faults where there were ~6,000 of 4 KiB (a one-record pack's start and load about 6 ms
// less on this VM). The buffers are simdjson's own allocations (3.0's public members
// document::tape, document::string_buf, dom_parser_implementation::structural_indexes),
// advised where a whole 2 MiB page of them lies within the size simdjson gives them at
// least; the advice changes nothing where THP is off, and allocate()'s failure is left
// to parse, which reports it.
void AllocateParserHuge(simdjson::dom::parser* parser, size_t bytes) {
  if (bytes < kHugePage || parser->allocate(bytes) != simdjson::SUCCESS ||
      parser->doc.allocate(bytes) != simdjson::SUCCESS)  // (parse allocates the document's)
    return;
  AdviseHugePages(parser->doc.tape.get(), bytes * sizeof(uint64_t));
  AdviseHugePages(parser->doc.string_buf.get(), bytes);
  if (parser->implementation)
    AdviseHugePages(parser->implementation->structural_indexes.get(), bytes * sizeof(uint32_t));
}

Result<Document> Document::Parse(std::string_view json, std::string_view name, size_t readable) {
  Document doc;
  doc.name_ = std::string(name);
  doc.parser_ = std::make_unique<simdjson::dom::parser>();
  AllocateParserHuge(doc.parser_.get(), json.size());
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

// How many distinct keys `object` has (a JSON object may repeat one), where some id has
// two keys (else the key index counts them, BuildKeyIndex): an open-addressing
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
  bool id_repeated = false;  // two keys on one id: the later wins, the earlier still counts
  for (auto field : vocab) {
    const size_t i = static_cast<size_t>(field.value.get_int64().value_unsafe());
    id_repeated |= has_id[i];
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
  in_vocab = has_id;
  const size_t distinct_by_id = BuildKeyIndex();
  // With one key per id, the distinct keys are the index's; else the object's own count.
  vocab_len = static_cast<int64_t>(id_repeated ? DistinctKeys(vocab, static_cast<size_t>(count))
                                               : distinct_by_id);
  vocab_limit = static_cast<int32_t>(n);
  id_limit = vocab_limit;
  return Status::Ok();
}

size_t Document::BuildKeyIndex() {
  size_t count = 0;
  for (bool h : in_vocab) count += h;
  size_t cap = 16;
  while (cap < count + count / 2 + 1) cap <<= 1;
  key_slots_.assign(cap, 0);
  key_mask_ = cap - 1;
  size_t distinct = 0;
  // In id order (a repeated key keeps its lowest id), a chunk's slots fetched ahead.
  constexpr size_t kChunk = 32;
  uint64_t hash[kChunk];
  for (size_t base = 0; base < vocab_key.size(); base += kChunk) {
    const size_t m = std::min(kChunk, vocab_key.size() - base);
    for (size_t j = 0; j < m; ++j) {
      const std::string_view k = vocab_key[base + j];
      hash[j] = in_vocab[base + j] ? XXH3_64bits(k.data(), k.size()) : 0;
      __builtin_prefetch(&key_slots_[hash[j] & key_mask_]);
    }
    for (size_t j = 0; j < m; ++j) {
      const size_t i = base + j;
      if (!in_vocab[i]) continue;
      const size_t pos = KeySlot(vocab_key[i], hash[j]);
      if (key_slots_[pos] == 0) {  // not seen before
        key_slots_[pos] =
            (static_cast<uint64_t>(i + 1) << 32) | static_cast<uint32_t>(hash[j] >> 32);
        ++distinct;
      }
    }
  }
  return distinct;
}

size_t Document::KeySlot(std::string_view key, uint64_t hash) const {
  const auto tag = static_cast<uint32_t>(hash >> 32);
  size_t pos = hash & key_mask_;
  for (uint64_t s; (s = key_slots_[pos]) != 0; pos = (pos + 1) & key_mask_) {
    if (static_cast<uint32_t>(s) == tag && vocab_key[(s >> 32) - 1] == key) break;
  }
  return pos;
}

int32_t Document::FindKey(std::string_view key, uint64_t hash) const {
  const uint64_t s = key_slots_[KeySlot(key, hash)];
  return s == 0 ? -1 : static_cast<int32_t>((s >> 32) - 1);
}

void Document::FindKeys(const std::string_view* keys, size_t n, int32_t* ids) const {
  if (key_slots_.empty()) {
    std::fill(ids, ids + n, -1);
    return;
  }
  // Stages over a chunk, each fetching what the next reads: the slots, then the
  // candidate's key view, then its bytes, then the comparison.
  constexpr size_t kChunk = 64;
  uint64_t hash[kChunk];
  int32_t cand[kChunk];
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t m = std::min(kChunk, n - base);
    const std::string_view* k = keys + base;
    for (size_t i = 0; i < m; ++i) {
      hash[i] = XXH3_64bits(k[i].data(), k[i].size());
      __builtin_prefetch(&key_slots_[hash[i] & key_mask_]);
    }
    for (size_t i = 0; i < m; ++i) {  // the first slot on the chain with the key's tag
      const auto tag = static_cast<uint32_t>(hash[i] >> 32);
      int32_t c = -1;
      for (size_t pos = hash[i] & key_mask_;; pos = (pos + 1) & key_mask_) {
        const uint64_t s = key_slots_[pos];
        if (s == 0) break;
        if (static_cast<uint32_t>(s) == tag) {
          c = static_cast<int32_t>((s >> 32) - 1);
          break;
        }
      }
      cand[i] = c;
      if (c >= 0) __builtin_prefetch(&vocab_key[static_cast<size_t>(c)]);
    }
    for (size_t i = 0; i < m; ++i) {  // only prefetches: the builtin would be deleted
      if (cand[i] >= 0) Prefetch(vocab_key[static_cast<size_t>(cand[i])].data());
    }
    for (size_t i = 0; i < m; ++i) {
      if (cand[i] < 0) {
        ids[base + i] = -1;
      } else if (vocab_key[static_cast<size_t>(cand[i])] == k[i]) {
        ids[base + i] = cand[i];
      } else {
        ids[base + i] = FindKey(k[i], hash[i]);  // another key with the same tag
      }
    }
  }
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

Result<MergeList> ReadMerges(const Document& doc, bool byte_level) {
  simdjson::dom::array merges;
  if (doc.model()["merges"].get(merges) != simdjson::SUCCESS) {
    return doc.Error("model.merges", "missing or not an array");
  }
  MergeList pairs;
  pairs.reserve(merges.size());
  // Merges are parsed a chunk at a time and their tokens looked up together; the
  // errors are the same, in the same order, as one merge at a time.
  constexpr size_t kChunk = 64;
  std::string_view sides[2 * kChunk];  // as written: a, b of each pending merge
  int32_t ids[2 * kChunk];
  size_t pending = 0;
  auto resolve = [&]() -> Status {
    doc.FindKeys(sides, 2 * pending, ids);
    for (size_t j = 0; j < pending; ++j) {
      int32_t side_id[2];
      for (size_t k = 0; k < 2; ++k) {
        const int32_t id = ids[2 * j + k];
        side_id[k] =
            id >= 0 && byte_level && !doc.vocab_byte_level[static_cast<size_t>(id)] ? -1 : id;
      }
      if (side_id[0] < 0 || side_id[1] < 0) {
        return doc.Error(fmt::format("model.merges[{}]", pairs.size()),
                         fmt::format("token '{}' is not {} in model.vocab",
                                     side_id[0] < 0 ? sides[2 * j] : sides[2 * j + 1],
                                     byte_level ? "a byte-level token" : "a token"));
      }
      pairs.emplace_back(side_id[0], side_id[1]);
    }
    pending = 0;
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
    sides[2 * pending] = a;
    sides[2 * pending + 1] = b;
    ++idx;
    if (++pending == kChunk) EK_RETURN_IF_ERROR(resolve());
  }
  EK_RETURN_IF_ERROR(resolve());
  return pairs;
}

}  // namespace ek::tokjson
