// Encoding and decoding with a loaded Tokenizer (the SentencePiece-style
// family's in tokenizer_pieces.cc); the tokenizer.json loader is
// tokenizer_json.cc.
#include "tokenize/tokenizer.h"

// xxHash inline: the cache hashes every piece, most of a few bytes.
#define XXH_INLINE_ALL
#include <fmt/core.h>
#include <simdjson.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>

#include "tokenize/tokenizer_internal.h"
#include "tokenize/unicode.h"
#include "tokjson/vocab_hash.h"

namespace ek::tokenize {

namespace {

std::atomic<uint64_t> g_generation{1};

// Pieces longer than kMaxKey are rare. (Pieces of one byte are cached too: their own
// branch to the byte's token mispredicted where one-byte pieces come and go, as spaces and
// punctuation do in code; through the probe, which the ring has fetched, the Llama 3
// encoder took 401.0 -> 391.5 ms.)
bool Cacheable(std::string_view piece) { return piece.size() <= PieceCache::kMaxKey; }

struct Marked {
  Span span;
  bool is_match;
};

}  // namespace

// HF pattern.rs find_matches + SplitDelimiterBehavior, over one piece.
void ApplySplit(std::string_view piece, const Pattern& pattern, SplitBehavior behavior, bool invert,
                std::vector<Span>* spans, std::vector<std::string_view>* out) {
  spans->clear();
  pattern.FindMatches(piece, spans);
  if (behavior == SplitBehavior::kIsolated) {  // the hot path: no need to mark
    uint32_t prev = 0;
    for (const Span& m : *spans) {
      if (m.begin > prev) out->push_back(piece.substr(prev, m.begin - prev));
      if (m.end > m.begin) out->push_back(piece.substr(m.begin, m.end - m.begin));
      prev = m.end;
    }
    if (prev < piece.size()) out->push_back(piece.substr(prev));
    return;
  }
  std::vector<Marked> marked;
  uint32_t prev = 0;
  for (const Span& m : *spans) {
    if (m.begin != prev) marked.push_back({{prev, m.begin}, invert});
    marked.push_back({m, !invert});
    prev = m.end;
  }
  if (prev != piece.size()) marked.push_back({{prev, static_cast<uint32_t>(piece.size())}, invert});
  std::vector<Span> result;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kRemoved:
      for (auto& m : marked)
        if (!m.is_match) result.push_back(m.span);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (auto& m : marked) {
        if (m.is_match && !previous_match && !result.empty()) {
          result.back().end = m.span.end;
        } else {
          result.push_back(m.span);
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = marked.rbegin(); it != marked.rend(); ++it) {
        if (it->is_match && !previous_match && !result.empty()) {
          result.back().begin = it->span.begin;
        } else {
          result.push_back(it->span);
        }
        previous_match = it->is_match;
      }
      std::reverse(result.begin(), result.end());
      break;
    case SplitBehavior::kContiguous:
      for (auto& m : marked) {
        if (m.is_match == previous_match && !result.empty()) {
          result.back().end = m.span.end;
        } else {
          result.push_back(m.span);
        }
        previous_match = m.is_match;
      }
      break;
  }
  for (const Span& s : result) {
    if (s.end > s.begin) out->push_back(piece.substr(s.begin, s.end - s.begin));
  }
}

// ---------------------------------------------------------------------------
// Encoding.

Tokenizer::Tokenizer() : generation_(g_generation.fetch_add(1)) {}
Tokenizer::~Tokenizer() = default;

EncodeScratch& Tokenizer::Scratch() const {
  // A thread keeps the scratch (piece cache included) of the last kKept tokenizers it
  // encoded with, the most recent first. With one, a thread that alternates between two
  // (comparing models, or fastpath_test's fast and plain paths text by text) built and
  // zeroed a fresh 2 MB cache on every switch: 0.1 ms a call in a release build, 5 ms
  // under ASan, where fastpath_test took 45 s a tokenizer. Two, not more: each scratch may
  // grow to 64 MB, and one of a tokenizer already destroyed waits to be pushed out.
  constexpr size_t kKept = 2;
  thread_local std::vector<std::unique_ptr<EncodeScratch>> kept;
  if (!kept.empty() && kept.front()->generation == generation_) return *kept.front();
  auto found = std::find_if(kept.begin(), kept.end(),
                            [this](const auto& s) { return s->generation == generation_; });
  std::unique_ptr<EncodeScratch> s;
  if (found != kept.end()) {
    s = std::move(*found);
    kept.erase(found);
  } else {
    if (kept.size() == kKept) kept.pop_back();
    s = std::make_unique<EncodeScratch>();
    s->generation = generation_;
  }
  kept.insert(kept.begin(), std::move(s));
  return *kept.front();
}

Result<std::vector<int32_t>> Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  EK_RETURN_IF_ERROR(Encode(text, &ids));
  return ids;
}

Status Tokenizer::Encode(std::string_view text, std::vector<int32_t>* ids) const {
  return EncodeImpl(text, ids, nullptr);
}

void Tokenizer::FinishDecoding() {
  overrides_.assign(std::make_move_iterator(decode_override_.begin()),
                    std::make_move_iterator(decode_override_.end()));
  decode_override_.clear();
  std::sort(overrides_.begin(), overrides_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  overridden_.assign(static_cast<size_t>(vocab_size_), false);
  for (const auto& [id, text] : overrides_) {
    if (id >= 0 && id < vocab_size_) overridden_[static_cast<size_t>(id)] = true;
  }
  // Each id's length for the offsets (0: none, or no decoder's join).
  token_len_.assign(static_cast<size_t>(vocab_size_), 0);
  if (join_with_space_) return;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (overridden_[static_cast<size_t>(id)] || static_cast<size_t>(id) < bpe_.id_limit())
      token_len_[static_cast<size_t>(id)] = static_cast<uint32_t>(TokenText(id).size());
  }
}

Status Tokenizer::EncodeWithOffsets(std::string_view text, std::vector<int32_t>* ids,
                                    std::vector<uint32_t>* ends) const {
  if (text.size() > UINT32_MAX) return InvalidArgumentError("text over 4 GiB");
  return EncodeImpl(text, ids, ends);
}

Status Tokenizer::EncodeImpl(std::string_view text, std::vector<int32_t>* ids,
                             std::vector<uint32_t>* ends) const {
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    size_t at = FirstInvalidUtf8(text);
    return InvalidArgumentError(fmt::format("invalid UTF-8 at byte {}", at));
  }
  EncodeChecked(text, ids, ends);
  return Status::Ok();
}

void Tokenizer::EncodeChecked(std::string_view text, std::vector<int32_t>* ids) const {
  EncodeChecked(text, ids, nullptr);
}

void Tokenizer::EncodeChecked(std::string_view text, std::vector<int32_t>* ids,
                              std::vector<uint32_t>* ends) const {
  if (text.empty()) return;
  if (pieces_) {
    EncodePieces(text, ids, ends);
    return;
  }
  EncodeScratch& s = Scratch();
  // The model tokens of the piece [b, e) of text, appended from index `from`:
  // with offsets wanted, each advances by its byte length, clamped to the
  // piece, whose last token ends at the piece's end.
  auto piece = [&](size_t b, size_t e) {
    size_t from = ids->size();
    EncodeNormalizable(text.substr(b, e - b), ids, s);
    if (!ends) return;
    size_t pos = b;
    for (size_t k = from; k < ids->size(); ++k) {
      int32_t id = (*ids)[k];
      pos = std::min(e, pos + (static_cast<uint32_t>(id) < token_len_.size()
                                   ? token_len_[static_cast<size_t>(id)]
                                   : 0));
      ends->push_back(static_cast<uint32_t>(pos));
    }
    if (ids->size() > from) ends->back() = static_cast<uint32_t>(e);
  };
  ForEachAddedSplit(raw_matcher_, text, &s.raw_splits, ids, ends, piece);
}

void Tokenizer::EncodeNormalizable(std::string_view text, std::vector<int32_t>* ids,
                                   EncodeScratch& s) const {
  if (nfc_) {
    if (size_t quick = NfcQuickEnd(text); quick < text.size()) {
      s.norm.clear();
      AppendNfcFrom(text, quick, &s.norm);
      text = s.norm;
    }
  }
  if (normalized_matcher_.empty()) {
    EncodePlain(text, ids, s);
    return;
  }
  s.norm_splits.clear();
  normalized_matcher_.Split(text, &s.norm_splits);
  for (const AddedSplit& sp : s.norm_splits) {
    if (sp.token_id >= 0) {
      ids->push_back(sp.token_id);
    } else {
      EncodePlain(text.substr(sp.begin, sp.end - sp.begin), ids, s);
    }
  }
}

// The one pattern that splits text into pieces, when the pre-tokenizer is one
// Split (Isolated, not inverted, a pattern whose matches cover the text: the
// hand-written ones) among ByteLevel steps that leave pieces as they are (no
// regex, no prefix space): Qwen2/3, Llama 3, GPT-2. Else null.
const Pattern* Tokenizer::OnlySplit() const {
  const Pattern* only = nullptr;
  for (const auto& step : steps_) {
    if (step->kind == PreStep::kByteLevel && step->add_prefix_space) return nullptr;
    if (!step->pattern) continue;
    if (only || step->behavior != SplitBehavior::kIsolated || step->invert ||
        !step->pattern->covers_all()) {
      return nullptr;
    }
    only = step->pattern.get();
  }
  return only;
}

void Tokenizer::EncodePlain(std::string_view text, std::vector<int32_t>* ids,
                            EncodeScratch& s) const {
  if (const Pattern* split = OnlySplit(); split && !plain_) {
    EncodeSpans(text, *split, ids, s);
    return;
  }
  s.pieces.clear();
  s.pieces.push_back(text);
  s.arena.clear();
  for (const auto& step : steps_) {
    s.next_pieces.clear();
    for (std::string_view piece : s.pieces) {
      if (step->kind == PreStep::kByteLevel && step->add_prefix_space && piece[0] != ' ') {
        s.arena.push_back(" ");
        s.arena.back().append(piece);
        piece = s.arena.back();
      }
      if (step->pattern) {
        ApplySplit(piece, *step->pattern, step->behavior, step->invert, &s.spans, &s.next_pieces);
      } else {
        s.next_pieces.push_back(piece);
      }
    }
    s.pieces.swap(s.next_pieces);
  }
  size_t bytes = 0;
  for (std::string_view p : s.pieces) bytes += p.size();
  EncodeEach(
      s.pieces.size(), bytes, nullptr, [&s](size_t i) { return s.pieces[i]; }, ids, s);
}

// Encodes pieces 0..n-1 (piece(i) gives each; `bytes`, their total size;
// readable_end, where they all lie in one text, its end, else null) in
// order. Each piece's key is made and its cache slot prefetched kAhead pieces
// ahead, into a ring of keys: most probes would otherwise wait on memory. The
// ids are written through a pointer into s.out, where a piece of k bytes has
// room for k ids (no piece makes more) and two more, and join `ids` at the end:
// no vector's size and capacity checked, and no call, for each piece.
template <class PieceAt>
void Tokenizer::EncodeEach(size_t n, size_t bytes, const char* readable_end, PieceAt piece,
                           std::vector<int32_t>* ids, EncodeScratch& s) const {
  constexpr size_t kAhead = 16, kRing = 32;  // 8 ahead: 3% slower on 50 MB
  PieceKey ring[kRing];
  auto load = [&](size_t i) {  // every piece's: a branch on the length would mispredict
    ring[i % kRing] = PieceCache::Key(piece(i), readable_end);
    s.cache.Prefetch(ring[i % kRing].hash);
  };
  if (s.out.size() < bytes + 2) s.out.resize(bytes + 2);
  if (!s.cache.holds_vocab() && s.cache.used() >= fill_vocab_after_ && bpe_.ignore_merges() &&
      !plain_ && !s.no_vocab_fill) {
    FillCacheWithVocab(s);
  }
  int32_t* const first = s.out.data();
  int32_t* o = first;
  for (size_t i = 0; i < std::min(n, kAhead); ++i) load(i);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) load(i + kAhead);
    const std::string_view p = piece(i);
    const bool cacheable = !plain_ && Cacheable(p);
    if (cacheable) {
      if (const int k = s.cache.Write(p, ring[i % kRing], o); k >= 0) {
        o += k;
        continue;
      }
    }
    s.word_ids.clear();
    // A piece that a cache holding the vocabulary misses is no key of it.
    bpe_.EncodeWord(p, &s.word_ids, &s.bpe, cacheable && s.cache.holds_vocab());
    const auto k = static_cast<uint32_t>(s.word_ids.size());
    std::memcpy(o, s.word_ids.data(), k * sizeof(int32_t));
    o += k;
    if (cacheable) s.cache.Insert(p, ring[i % kRing], s.word_ids.data(), k);
  }
  ids->insert(ids->end(), first, o);
}

// ignore_merges: a piece that is a vocabulary key is that one token, so the keys of 2 to
// kMaxKey bytes (every one the cache would be asked for) go in as such. The pieces the
// cache then misses skip BpeModel's lookup of the whole piece, which about nine in ten
// of them fail (Llama 3: 470,000 lookups over the 50 MB corpus). Keys past 16 bytes went
// in too (Llama 3 has 1,312; their ids and the rest of their bytes in the arena): words
// of nine Cyrillic letters are 18 bytes, and each such miss was still looked up (1.7% of
// a one-core pack). Only with no key repeated: the id put in must be the lookup's.
void Tokenizer::FillCacheWithVocab(EncodeScratch& s) const {
  if (!bpe_.keys_unique()) {
    s.no_vocab_fill = true;
    return;
  }
  std::vector<std::pair<std::string_view, int32_t>> vocab;
  vocab.reserve(bpe_.id_limit());
  for (size_t id = 0; id < bpe_.id_limit(); ++id) {
    const auto i = static_cast<int32_t>(id);
    if (!bpe_.HasId(i)) continue;
    const std::string& key = bpe_.TokenBytes(i);
    if (key.size() >= 2 && key.size() <= PieceCache::kMaxKey) vocab.emplace_back(key, i);
  }
  if (!s.cache.HoldVocab(vocab)) s.no_vocab_fill = true;
}

// EncodePlain for a pre-tokenizer of one split (OnlySplit): each match is a
// piece, taken straight from the matches (no list of pieces).
void Tokenizer::EncodeSpans(std::string_view text, const Pattern& split, std::vector<int32_t>* ids,
                            EncodeScratch& s) const {
  s.spans.clear();
  split.FindMatches(text, &s.spans);
  const Span* spans = s.spans.data();
  EncodeEach(
      s.spans.size(), text.size(), text.data() + text.size(),
      [text, spans](size_t i) {
        return text.substr(spans[i].begin, spans[i].end - spans[i].begin);
      },
      ids, s);
}

uint64_t Tokenizer::VocabFingerprint() const {
  tokjson::VocabHash hash;
  std::string bytes;
  std::unordered_map<int32_t, std::string_view> added_text;  // SentencePiece-style: content
  if (pieces_) {
    for (const AddedToken& a : added_) added_text[a.id] = a.content;
  }
  if (!pieces_ && !join_with_space_) {
    // Byte-level: each id's bytes, as Decode gives them.
    for (int32_t id = 0; id < vocab_size_; ++id) {
      if (has_id_[static_cast<size_t>(id)]) hash.Add(id, TokenText(id));
    }
    return hash.Digest();
  }
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (!has_id_[static_cast<size_t>(id)]) continue;
    if (pieces_) {  // the token text (tokjson/vocab_fingerprint.h says why)
      auto it = added_text.find(id);
      hash.Add(id, it != added_text.end() ? it->second : std::string_view(bpe_.TokenBytes(id)));
      continue;
    }
    bytes.clear();
    const int32_t one[1] = {id};
    if (!Decode(one, &bytes).ok()) continue;
    hash.Add(id, bytes);
  }
  return hash.Digest();
}

Status Tokenizer::Decode(std::span<const int32_t> ids, std::string* out) const {
  if (pieces_) return DecodePieces(ids, out);
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || id >= vocab_size_ || !has_id_[static_cast<size_t>(id)]) {
      return InvalidArgumentError(
          fmt::format("id {} at position {} is not in the vocabulary", id, i));
    }
    if (join_with_space_) {
      if (i) out->push_back(' ');
      auto it = raw_token_text_.find(id);
      if (it == raw_token_text_.end()) {
        return InternalError(fmt::format("id {} has no token text", id));  // has_id_ said it exists
      }
      out->append(it->second);
    } else {
      out->append(TokenText(id));
    }
  }
  return Status::Ok();
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& t : added_) {
    if (t.content == token) return t.id;
  }
  int32_t id = bpe_.Find(token);
  if (id >= 0) return id;
  return std::nullopt;
}

std::string Tokenizer::Describe() const {
  if (pieces_) {
    return fmt::format(
        "SentencePiece-style BPE: {} vocab, {} merges, {} added tokens, normalizer {}, "
        "pre-tokenizer {}{}",
        bpe_.vocab_count(), bpe_.merge_count(), added_.size(), pieces_->normalizer.Describe(),
        pieces_->describe_pre, pieces_->model.options().byte_fallback ? ", byte fallback" : "");
  }
  std::string pre;
  for (const auto& step : steps_) {
    if (!pre.empty()) pre += "+";
    if (step->kind == PreStep::kByteLevel) {
      pre += step->pattern ? "bytelevel(gpt2)" : "bytelevel";
    } else {
      pre += "split(" + std::string(step->pattern->kind()) + ")";
    }
  }
  if (pre.empty()) pre = "bytelevel";
  return fmt::format(
      "byte-level BPE: {} vocab, {} merges, {} added tokens, normalizer {}, "
      "pre-tokenizer {}",
      bpe_.vocab_count(), bpe_.merge_count(), added_.size(), nfc_ ? "NFC" : "none", pre);
}

}  // namespace ek::tokenize
