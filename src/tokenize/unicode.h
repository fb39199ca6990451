// Unicode helpers for the tokenizer: code point classes matching the regex
// engine Hugging Face tokenizers uses (Oniguruma: \p{L}, \p{N}, \s) and NFC;
// the UTF-8 codec is core's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace ek::tokenize {

// Class bits of a code point.
inline constexpr uint8_t kClassLetter = 1;     // \p{L}: Lu Ll Lt Lm Lo
inline constexpr uint8_t kClassNumber = 2;     // \p{N}: Nd Nl No
inline constexpr uint8_t kClassSpace = 4;      // \s: Unicode White_Space (Oniguruma's Space ctype)
inline constexpr uint8_t kClassCombining = 8;  // canonical combining class != 0
inline constexpr uint8_t kClassNfcQc = 16;     // NFC_Quick_Check = No or Maybe
inline constexpr uint8_t kClassPost9 = 32;     // assigned after Unicode 9.0 (inert in HF's NFC)
// NFC_Quick_Check = Maybe with combining class 0 and no decomposition (Indic vowel signs and
// length marks, Hangul vowel and final jamo): it joins only the character right before it,
// and only where the two compose.
inline constexpr uint8_t kClassNfcMaybeStarter = 64;

// Classes of every code point: the BMP flat, the rest in a two-stage table; built once
// (thread-safe). The regex classes follow Unicode 16.0, as the Oniguruma 6.9.10 inside
// Hugging Face tokenizers does; the NFC bits follow HF's Unicode 9.0 normalization tables
// (tools/gen_unicode_tables.py explains both).
class CharClasses {
 public:
  static const CharClasses& Get();
  uint8_t Of(uint32_t cp) const {
    if (cp < 0x10000) return bmp_[cp];
    if (cp >= 0x110000) return 0;
    return static_cast<uint8_t>(leaves_[(static_cast<size_t>(index_[cp >> 8]) << 8) | (cp & 0xFF)]);
  }
  // NFC-inert: combining class 0 and NFC_Quick_Check = Yes (neither kClassCombining nor
  // kClassNfcQc), for a code point below U+10000: one bit of an 8 KB map, which NFC's
  // quick check reads instead of Of().
  bool NfcInert(uint32_t cp) const { return (nfc_inert_[cp >> 6] >> (cp & 63)) & 1; }

 private:
  CharClasses();
  // The classes of the BMP flat (64 KB): one load, where the two stages are two dependent
  // ones (the 64-byte blocks look up each character of other scripts; BM_PreTokenize of
  // the corpus's non-ASCII texts 40.2 -> 37.6 ms).
  uint8_t bmp_[0x10000];
  uint64_t nfc_inert_[0x10000 / 64];
  uint16_t index_[0x1100];
  std::string leaves_;
};

// The codec is core's (core/utf8.h): decoding, encoding, validation and
// Python-style replacement.
using ::ek::AppendUtf8;
using ::ek::DecodeUtf8;
using ::ek::FirstInvalidUtf8;
using ::ek::ReplaceInvalidUtf8;

// UAX #15 quick check: true when `s` (valid UTF-8) is certainly NFC.
bool IsNfcQuick(std::string_view s);
// The quick check from byte `from` (a character's start): the start of the
// first character it cannot pass, or s.size().
size_t NfcQuickEnd(std::string_view s, size_t from = 0);

// Appends the NFC form of valid UTF-8 `s` to `out`, as Hugging Face's NFC
// normalizer computes it (Unicode 9.0 tables: later characters are inert).
void AppendNfc(std::string_view s, std::string* out);
// The same, given NfcQuickEnd(s).
void AppendNfcFrom(std::string_view s, size_t quick_end, std::string* out);
// The plain path, for differential tests: the whole text through the tables,
// where AppendNfc sends only the stretches the quick check stops in.
void AppendNfcWhole(std::string_view s, std::string* out);
// The same for NFKC (Hugging Face's NFKC normalizer).
void AppendNfkc(std::string_view s, std::string* out);

// The code points of a general category ("Lu", ...) or category group ("L",
// "M", "N", "P", "S", "Z") in Unicode 16.0, as sorted inclusive ranges; empty
// for other names.
std::vector<std::pair<uint32_t, uint32_t>> CategoryRanges(std::string_view name);

// Rust char::is_whitespace / is_alphanumeric, used by added-token rules.
bool IsWhiteSpace(uint32_t cp);
bool IsAlphanumeric(uint32_t cp);

}  // namespace ek::tokenize
