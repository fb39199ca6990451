// Encoding and decoding for the SentencePiece-style family (Gemma, Llama 2,
// Mistral v0.x), in Hugging Face tokenizers' order (tokenizer/mod.rs
// encode_single_sequence, added_vocabulary.rs extract_and_normalize):
//   1. the added tokens that match raw text (normalized: false) split the text;
//   2. each piece between them is normalized on its own (so Prepend puts its
//      "▁" before each), then split again by the added tokens that match
//      normalized text (their contents normalized the same way);
//   3. each piece left is pre-tokenized (Split steps, then Metaspace), and each
//      pre-token is a word for the character BPE (sentencepiece_bpe.h).
// Offsets map each token's end back through Metaspace and the normalizer
// (their alignments) to the text given.
#include <fmt/core.h>

#include <numeric>

#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_internal.h"

namespace ek::tokenize {

void Tokenizer::EncodePieces(std::string_view text, std::vector<int32_t>* ids,
                             std::vector<uint32_t>* ends) const {
  EncodeScratch& s = Scratch();
  ForEachAddedSplit(raw_matcher_, text, &s.raw_splits, ids, ends, [&](size_t b, size_t e) {
    PiecesSegment(text.substr(b, e - b), b, ids, ends, s);
  });
}

// One piece of the text between raw added tokens, at byte `base` of the text.
void Tokenizer::PiecesSegment(std::string_view seg, size_t base, std::vector<int32_t>* ids,
                              std::vector<uint32_t>* ends, EncodeScratch& s) const {
  const size_t from = ids->size();
  std::string_view norm = seg;
  if (!pieces_->normalizer.empty()) {
    pieces_->normalizer.Apply(seg, &s.norm, ends ? &s.align : nullptr, &s.tmp, &s.tmp_align);
    norm = s.norm;
  } else if (ends) {
    s.align.resize(seg.size() + 1);
    std::iota(s.align.begin(), s.align.end(), 0u);
  }
  // Hugging Face's prepend_scheme "first" asks whether a piece starts at the
  // text's first byte; a piece after a normalized added token does not.
  const bool at_start = base == 0;
  if (normalized_matcher_.empty()) {
    PiecesPlain(norm, 0, norm.size(), at_start, base, ids, ends, s);
  } else {
    s.norm_splits.clear();
    normalized_matcher_.Split(norm, &s.norm_splits);
    for (const AddedSplit& sp : s.norm_splits) {
      if (sp.token_id >= 0) {
        ids->push_back(sp.token_id);
        if (ends) ends->push_back(static_cast<uint32_t>(base + s.align[sp.end]));
      } else {
        PiecesPlain(norm, sp.begin, sp.end - sp.begin, at_start && sp.begin == 0, base, ids, ends,
                    s);
      }
    }
  }
  if (ends && ids->size() > from) ends->back() = static_cast<uint32_t>(base + seg.size());
}

// norm[off, off + len): text free of added tokens. With `ends`, s.align maps
// norm's boundaries to seg's (at `base` in the text).
void Tokenizer::PiecesPlain(std::string_view norm, size_t off, size_t len, bool first, size_t base,
                            std::vector<int32_t>* ids, std::vector<uint32_t>* ends,
                            EncodeScratch& s) const {
  const Pieces& p = *pieces_;
  s.pieces.clear();
  s.pieces.push_back(norm.substr(off, len));
  for (const auto& step : p.splits) {
    s.next_pieces.clear();
    for (std::string_view piece : s.pieces) {
      ApplySplit(piece, *step->pattern, step->behavior, step->invert, &s.spans, &s.next_pieces);
    }
    s.pieces.swap(s.next_pieces);
  }
  // Appends the tokens of `word` (inside `text`, whose boundaries `map` sends
  // to norm's; identity when null) with their ends.
  auto emit = [&](std::string_view word, std::string_view text, const std::vector<uint32_t>* map,
                  size_t text_off) {
    const size_t before = ids->size();
    PiecesWord(word, ids, s);
    if (!ends) return;
    size_t pos = static_cast<size_t>(word.data() - text.data());
    const size_t stop = pos + word.size();
    uint32_t last = ends->empty() ? 0 : ends->back();
    for (size_t k = before; k < ids->size(); ++k) {
      pos = std::min(stop, pos + p.model.PieceLength((*ids)[k], text.substr(pos)));
      size_t at = k + 1 == ids->size() ? stop : pos;
      size_t in_norm = text_off + (map ? (*map)[at] : at);
      last = std::max(last, static_cast<uint32_t>(base + s.align[in_norm]));
      ends->push_back(last);
    }
  };
  for (std::string_view piece : s.pieces) {
    if (!p.has_metaspace) {
      emit(piece, norm, nullptr, 0);
      continue;
    }
    // Metaspace over this piece into s.meta, with s.meta_align to the piece.
    const Metaspace& m = p.metaspace;
    const size_t piece_off = static_cast<size_t>(piece.data() - norm.data());
    s.meta.clear();
    s.meta_align.clear();
    const bool starts =
        piece.substr(0, 1) == " " || piece.substr(0, m.replacement.size()) == m.replacement;
    if (!starts && (m.prepend == Metaspace::kAlways ||
                    (m.prepend == Metaspace::kFirst && first && piece_off == off))) {
      s.meta = m.replacement;
      if (ends) s.meta_align.assign(m.replacement.size(), 0u);
    }
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece[i] == ' ') {
        if (ends) {
          s.meta_align.push_back(static_cast<uint32_t>(i));
          s.meta_align.insert(s.meta_align.end(), m.replacement.size() - 1,
                              static_cast<uint32_t>(i + 1));
        }
        s.meta += m.replacement;
      } else {
        if (ends) s.meta_align.push_back(static_cast<uint32_t>(i));
        s.meta.push_back(piece[i]);
      }
    }
    if (ends) s.meta_align.push_back(static_cast<uint32_t>(piece.size()));
    std::string_view meta = s.meta;
    if (!m.split) {
      emit(meta, meta, ends ? &s.meta_align : nullptr, piece_off);
      continue;
    }
    // A pre-token starts at each replacement (MergedWithNext).
    size_t start = 0;
    while (start < meta.size()) {
      size_t next = meta.find(m.replacement, start + 1);
      if (next == std::string_view::npos) next = meta.size();
      emit(meta.substr(start, next - start), meta, ends ? &s.meta_align : nullptr, piece_off);
      start = next;
    }
  }
}

// One pre-token through the character BPE: cut where no merge crosses
// (CharBpe::NextCut; Gemma's whole text is one pre-token), each part through
// the cache when short. The plain path takes the word whole.
void Tokenizer::PiecesWord(std::string_view word, std::vector<int32_t>* ids,
                           EncodeScratch& s) const {
  const CharBpe& model = pieces_->model;
  if (plain_ || !model.cuts()) {
    PiecesPart(word, ids, s);
    return;
  }
  for (size_t b = 0; b < word.size();) {
    const size_t e = model.NextCut(word, b);
    PiecesPart(word.substr(b, e - b), ids, s);
    b = e;
  }
}

void Tokenizer::PiecesPart(std::string_view word, std::vector<int32_t>* ids,
                           EncodeScratch& s) const {
  if (plain_ || word.size() > PieceCache::kMaxKey) {
    pieces_->model.EncodeWord(word, ids, &s.bpe);
    return;
  }
  const PieceKey key = PieceCache::Key(word);
  if (s.cache.Append(word, key, ids)) return;
  size_t before = ids->size();
  pieces_->model.EncodeWord(word, ids, &s.bpe);
  s.cache.Insert(word, key, ids->data() + before, static_cast<uint32_t>(ids->size() - before));
}

Status Tokenizer::DecodePieces(std::span<const int32_t> ids, std::string* out) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || id >= vocab_size_ || !has_id_[static_cast<size_t>(id)]) {
      return InvalidArgumentError(
          fmt::format("id {} at position {} is not in the vocabulary", id, i));
    }
    // An added token's content, else the vocabulary's key (Hugging Face's
    // simple_id_to_token, then the model's id_to_token).
    tokens.emplace_back(TokenText(id));
  }
  pieces_->decoder.Decode(std::move(tokens), out);
  return Status::Ok();
}

}  // namespace ek::tokenize
