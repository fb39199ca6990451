// The one UTF-8 codec (RFC 3629, Unicode 16.0 §3.9 D92 well-formedness), used by
// the JSONL readers, the tokenizer and the template engine:
//   DecodeUtf8       one code point of text already known to be valid (the
//                    tokenizer's hot loops: no checks, inline)
//   DecodeUtf8At     one code point at s[i], never reading past s (bytes past the
//                    end count as 0), for text checked on entry
//   DecodeUtf8Checked one code point with validity: its length, or 0 at an
//                    ill-formed sequence
//   Utf8CharStart    the start of the character that ends at a byte offset
//   NextNonAscii     the next byte that is not ASCII (16 bytes a step; inline)
//   AppendUtf8       the encoding of one code point
//   FirstInvalidUtf8 validation: the byte offset of the first bad byte
//   ReplaceInvalidUtf8 Python's errors="replace"
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ek {

// Decodes one code point from valid UTF-8 at p; returns its length (1-4).
inline size_t DecodeUtf8(const unsigned char* p, uint32_t* cp) {
  unsigned char c = p[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if (c < 0xE0) {
    *cp = ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    return 2;
  }
  if (c < 0xF0) {
    *cp = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    return 3;
  }
  *cp = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  return 4;
}

// The start of the character of valid UTF-8 that ends at byte `end` of s
// (0 < end <= s.size()), stepping back over continuation bytes no further than
// `floor` (a character start before end).
inline size_t Utf8CharStart(std::string_view s, size_t end, size_t floor = 0) {
  size_t b = end - 1;
  while (b > floor && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return b;
}

// Decodes the code point of valid UTF-8 at s[i] (i < s.size()); *len gets its
// length by the lead byte. A sequence cut off by the end of s reads the missing
// bytes as 0 rather than past the end.
inline uint32_t DecodeUtf8At(std::string_view s, size_t i, size_t* len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const size_t left = s.size() - i;
  unsigned char c = p[0];
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  *len = n;
  if (n <= left) {
    uint32_t cp;
    DecodeUtf8(p, &cp);
    return cp;
  }
  unsigned char b[4] = {c, 0, 0, 0};
  for (size_t k = 1; k < left; ++k) b[k] = p[k];
  uint32_t cp;
  DecodeUtf8(b, &cp);
  return cp;
}

// Decodes one well-formed code point at s[i] (i < s.size()) into *cp and
// returns its length; returns 0 when s[i] starts an ill-formed sequence (*cp
// untouched), with *bad (when given) set to the length of its maximal
// ill-formed subpart (at least 1), the bytes errors="replace" turns into one
// U+FFFD.
size_t DecodeUtf8Checked(std::string_view s, size_t i, uint32_t* cp, size_t* bad = nullptr);

// Appends the UTF-8 encoding of cp (cp < 0x110000).
void AppendUtf8(std::string* out, uint32_t cp);

// The first byte of s[i..n) that is not ASCII, or n: sixteen bytes a step (SSE2 movemask),
// else eight. (NFC's quick check took eight ASCII bytes at a time, and then one byte at a
// time up to a character that is not: BM_NfcQuickCheck 22.8 -> 15.7 ms on the 50 MB
// corpus, two thirds of whose bytes are ASCII even in its other texts.)
inline size_t NextNonAscii(const unsigned char* s, size_t i, size_t n) {
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16) {
    const int high = _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    if (high != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(high)));
  }
#endif
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    if (const uint64_t high = w & 0x8080808080808080ull; high != 0)
      return i + static_cast<size_t>(__builtin_ctzll(high)) / 8;
  }
  while (i < n && s[i] < 0x80) ++i;
  return i;
}

// Byte offset of the first byte that is not part of well-formed UTF-8, or npos.
size_t FirstInvalidUtf8(std::string_view s);

// Replaces each maximal ill-formed subsequence with U+FFFD, exactly as
// Python's bytes.decode("utf-8", errors="replace") (and Rust's
// String::from_utf8_lossy) do. Returns the number of replacements.
size_t ReplaceInvalidUtf8(std::string_view in, std::string* out);

}  // namespace ek
