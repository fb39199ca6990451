#include "tokenize/sentencepiece_bpe.h"

#include <fmt/core.h>

#include "tokenize/unicode.h"

namespace ek::tokenize {

void CharBpe::Init(const BpeModel* model, CharBpeOptions options) {
  bpe_ = model;
  opt_ = options;
  for (int c = 0; c < 128; ++c) {
    const char ch = static_cast<char>(c);
    ascii_[c] = model->Find(std::string_view(&ch, 1));
  }
  is_byte_token_.assign(model->id_limit(), false);
  for (int b = 0; b < 256; ++b) {
    // Hugging Face's spelling: format!("<{:#04X}>"), "<0x0A>".
    byte_token_[b] = model->Find(fmt::format("<0x{:02X}>", b));
    if (byte_token_[b] >= 0) is_byte_token_[static_cast<size_t>(byte_token_[b])] = true;
  }
  InitCuts();
}

namespace {
constexpr std::string_view kSpace = "\xE2\x96\x81";  // "▁", U+2581
}  // namespace

void CharBpe::InitCuts() {
  cuts_ = !opt_.ignore_merges && bpe_->Find(kSpace) >= 0;
  no_cut_after_.clear();
  for (int c = 0; c < 128; ++c) cut_after_ascii_[c] = ascii_[c] >= 0;
  if (!cuts_) return;
  for (size_t id = 0; id < bpe_->id_limit(); ++id) {
    if (!bpe_->HasId(static_cast<int32_t>(id))) continue;
    const std::string& text = bpe_->TokenBytes(static_cast<int32_t>(id));
    for (size_t k = text.find(kSpace, 1); k != std::string::npos; k = text.find(kSpace, k + 1)) {
      const size_t b = Utf8CharStart(text, k);
      const std::string_view before(text.data() + b, k - b);
      if (before == kSpace) continue;  // runs of "▁": never cut inside one
      if (before.size() == 1 && static_cast<unsigned char>(before[0]) < 0x80) {
        cut_after_ascii_[static_cast<unsigned char>(before[0])] = false;
      } else {
        no_cut_after_.emplace_back(before);
      }
    }
  }
}

bool CharBpe::CutAfter(std::string_view ch) const {
  const auto c0 = static_cast<unsigned char>(ch[0]);
  if (c0 < 0x80) return cut_after_ascii_[c0];
  if (ch == kSpace || bpe_->Find(ch) < 0) return false;  // unknown: bytes or unk, not itself
  for (const std::string& no : no_cut_after_) {
    if (no == ch) return false;
  }
  return true;
}

size_t CharBpe::NextCut(std::string_view word, size_t from) const {
  for (size_t i = from + 1; i < word.size();) {
    const size_t k = word.find(kSpace, i);
    if (k == std::string_view::npos) break;
    const size_t b = Utf8CharStart(word, k, from);
    if (CutAfter(word.substr(b, k - b))) return k;
    i = k + kSpace.size();
  }
  return word.size();
}

bool CharBpe::IsByteToken(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < is_byte_token_.size() &&
         is_byte_token_[static_cast<size_t>(id)];
}

size_t CharBpe::PieceLength(int32_t id, std::string_view rest) const {
  if (IsByteToken(id)) return 1;
  if (id == opt_.unk_id && !rest.empty()) {
    uint32_t cp;
    return DecodeUtf8(reinterpret_cast<const unsigned char*>(rest.data()), &cp);
  }
  return bpe_->HasId(id) ? bpe_->TokenBytes(id).size() : 0;
}

void CharBpe::EncodeWord(std::string_view word, std::vector<int32_t>* out,
                         BpeScratch* scratch) const {
  if (opt_.ignore_merges) {
    int32_t id = bpe_->Find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<int32_t>& sym = scratch->sym;
  sym.clear();
  // An unknown token waits here until a known character follows (or the word
  // ends), so that fuse_unk can extend it; byte-fallback tokens do not flush
  // it (merge_word's order, kept even where it reorders).
  bool unk_pending = false;
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  for (size_t i = 0; i < word.size();) {
    int32_t id;
    size_t len;
    if (p[i] < 0x80) {
      id = ascii_[p[i]];
      len = 1;
    } else {
      uint32_t cp;
      len = DecodeUtf8(p + i, &cp);
      id = bpe_->Find(word.substr(i, len));
    }
    if (id >= 0) {
      if (unk_pending) sym.push_back(opt_.unk_id);
      unk_pending = false;
      sym.push_back(id);
      i += len;
      continue;
    }
    if (opt_.byte_fallback) {
      bool all = true;
      for (size_t k = 0; k < len; ++k) all &= byte_token_[p[i + k]] >= 0;
      if (all) {
        for (size_t k = 0; k < len; ++k) sym.push_back(byte_token_[p[i + k]]);
        i += len;
        continue;
      }
    }
    if (opt_.unk_id >= 0) {
      if (unk_pending && !opt_.fuse_unk) sym.push_back(opt_.unk_id);
      unk_pending = true;
    }
    i += len;
  }
  if (unk_pending) sym.push_back(opt_.unk_id);
  if (sym.empty()) return;
  bpe_->MergeSymbols(sym.size(), out, scratch);
}

}  // namespace ek::tokenize
