#include "tokenize/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "tokenize/unicode.h"

namespace ek::tokenize {

void AddedTokenMatcher::Build(std::vector<AddedToken> tokens, std::vector<std::string> patterns) {
  tokens_ = std::move(tokens);
  nodes_.assign(1, Node{});
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  for (size_t t = 0; t < patterns.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (unsigned char c : p) {
      auto& kids = nodes_[static_cast<size_t>(node)].kids;
      auto it = std::find_if(kids.begin(), kids.end(), [c](auto& k) { return k.first == c; });
      if (it != kids.end()) {
        node = it->second;
      } else {
        int32_t fresh = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].kids.emplace_back(c, fresh);
        nodes_.push_back(Node{});
        node = fresh;
      }
    }
    // The first pattern wins when two tokens share a text.
    if (nodes_[static_cast<size_t>(node)].token < 0) {
      nodes_[static_cast<size_t>(node)].token = static_cast<int32_t>(t);
    }
  }
  // One first byte for all ('<' for Qwen's and Llama 3's): memchr finds candidates.
  only_first_ = -1;
  for (int b = 0; b < 256; ++b) {
    if (!first_byte_[b]) continue;
    if (only_first_ != -1) {
      only_first_ = -1;
      break;
    }
    only_first_ = b;
  }
}

bool AddedTokenMatcher::FindNext(std::string_view text, size_t from, size_t* begin, size_t* end,
                                 int32_t* which) const {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = from; i < text.size(); ++i) {
    if (only_first_ >= 0) {
      const void* at = std::memchr(s + i, only_first_, text.size() - i);
      if (!at) return false;
      i = static_cast<size_t>(static_cast<const unsigned char*>(at) - s);
    } else if (!first_byte_[s[i]]) {
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto& kids = nodes_[static_cast<size_t>(node)].kids;
      auto it =
          std::find_if(kids.begin(), kids.end(), [c = s[j]](auto& k) { return k.first == c; });
      if (it == kids.end()) break;
      node = it->second;
      if (nodes_[static_cast<size_t>(node)].token >= 0) {
        best = nodes_[static_cast<size_t>(node)].token;
        best_end = j + 1;
      }
    }
    if (best >= 0) {
      *begin = i;
      *end = best_end;
      *which = best;
      return true;
    }
  }
  return false;
}

namespace {

uint32_t LastChar(std::string_view s) {
  const size_t i = Utf8CharStart(s, s.size());
  uint32_t cp;
  DecodeUtf8(reinterpret_cast<const unsigned char*>(s.data()) + i, &cp);
  return cp;
}

uint32_t FirstChar(std::string_view s) {
  uint32_t cp;
  DecodeUtf8(reinterpret_cast<const unsigned char*>(s.data()), &cp);
  return cp;
}

// Offset just after the last non-whitespace char of s, or 0.
size_t SpaceLeftmostAtEnd(std::string_view s) {
  size_t i = s.size();
  while (i > 0) {
    const size_t k = Utf8CharStart(s, i);
    uint32_t cp;
    DecodeUtf8(reinterpret_cast<const unsigned char*>(s.data()) + k, &cp);
    if (!IsWhiteSpace(cp)) return i;
    i = k;
  }
  return 0;
}

// Offset of the first non-whitespace char of s, or s.size().
size_t SpaceRightmostAtStart(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint32_t cp;
    size_t len = DecodeUtf8(reinterpret_cast<const unsigned char*>(s.data()) + i, &cp);
    if (!IsWhiteSpace(cp)) return i;
    i += len;
  }
  return s.size();
}

}  // namespace

void AddedTokenMatcher::Split(std::string_view text, std::vector<AddedSplit>* out) const {
  size_t start_offset = 0, search = 0, mb, me;
  int32_t which;
  while (!tokens_.empty() && search < text.size() && FindNext(text, search, &mb, &me, &which)) {
    search = me;
    const AddedToken& tok = tokens_[static_cast<size_t>(which)];
    size_t start = mb, stop = me;
    if (tok.single_word) {
      bool start_space = start == 0 || !IsAlphanumeric(LastChar(text.substr(0, start)));
      bool stop_space = stop == text.size() || !IsAlphanumeric(FirstChar(text.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(SpaceLeftmostAtEnd(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += SpaceRightmostAtStart(text.substr(stop));
    if (start_offset < start) out->push_back({start_offset, start, -1});
    out->push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out->push_back({start_offset, text.size(), -1});
}

}  // namespace ek::tokenize
