#include "tokenize/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/huge_pages.h"

namespace ek::tokenize {

namespace {

struct Range {
  uint32_t lo, hi;
};
constexpr Range kNfcQcNoMaybe[] = {
#include "tokenize/nfc_qc_table.inc"
};

struct CodeRange {
  uint32_t lo, hi;
};
struct CategoryRun {
  uint32_t lo, hi;
  int cat;
};
#include "tokenize/unicode_tables.inc"

template <size_t N>
void MarkRanges(std::span<uint8_t> flat, const CodeRange (&ranges)[N], uint8_t bit) {
  for (const CodeRange& r : ranges) {
    for (uint32_t cp = r.lo; cp <= r.hi && cp < 0x110000; ++cp) flat[cp] |= bit;
  }
}

}  // namespace

const CharClasses& CharClasses::Get() {
  static const CharClasses* instance = new CharClasses();
  return *instance;
}

CharClasses::CharClasses() {
  std::vector<uint8_t, HugeFriendlyAllocator<uint8_t>> flat(0x110000, 0);  // 1.1 MB
  MarkRanges(flat, kLetterRanges, kClassLetter);
  MarkRanges(flat, kNumberRanges, kClassNumber);
  MarkRanges(flat, kSpaceRanges, kClassSpace);
  MarkRanges(flat, kPost9Ranges, kClassPost9);
  // Combining marks lie in planes 0-3 and 14: planes 4-13 are unassigned and 15-16
  // private use, where every class is 0 (CharClassesTest.CombiningBitIsUtf8procsClass-
  // Everywhere asks utf8proc about all of them). 2 ms of every start, those 720,000 lookups.
  constexpr uint32_t kPlane4 = 0x40000, kPlane14 = 0xE0000, kPlane15 = 0xF0000;
  for (uint32_t cp = 0x300; cp < kPlane15; cp = cp + 1 == kPlane4 ? kPlane14 : cp + 1) {
    if (flat[cp] & kClassPost9) continue;  // inert for NFC
    if (utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class != 0) {
      flat[cp] |= kClassCombining;
    }
  }
  for (const Range& r : kNfcQcNoMaybe) {
    for (uint32_t cp = r.lo; cp <= r.hi; ++cp) {
      if (flat[cp] & kClassPost9) continue;
      flat[cp] |= kClassNfcQc;
      // No decomposition: Maybe, not No (a No character has a canonical one).
      const utf8proc_property_t* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
      if (prop->combining_class == 0 && prop->decomp_seqindex == UINT16_MAX) {
        flat[cp] |= kClassNfcMaybeStarter;
      }
    }
  }
  std::memcpy(bmp_, flat.data(), sizeof bmp_);
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    if (cp % 64 == 0) nfc_inert_[cp / 64] = 0;
    if (!(flat[cp] & (kClassCombining | kClassNfcQc)))
      nfc_inert_[cp / 64] |= uint64_t{1} << (cp % 64);
  }
  // Deduplicate 256-entry leaves (by their views: no copy of each, no ordered compares).
  std::unordered_map<std::string_view, uint16_t> uniq;
  const auto* bytes = reinterpret_cast<const char*>(flat.data());
  for (uint32_t block = 0; block < 0x1100; ++block) {
    const std::string_view leaf(bytes + block * 256, 256);
    auto [it, inserted] = uniq.emplace(leaf, static_cast<uint16_t>(uniq.size()));
    if (inserted) leaves_.append(leaf);
    index_[block] = it->second;
  }
}

namespace {

// Whether NFC joins `prev` and `cp` (a kClassNfcMaybeStarter character right
// after it): the two characters through the tables, the answer kept per thread
// (a text in Bengali asks about the same few dozen pairs over and over).
bool JoinsPrevious(uint32_t prev, uint32_t cp) {
  thread_local std::unordered_map<uint64_t, bool> known;
  const uint64_t key = (static_cast<uint64_t>(prev) << 21) | cp;
  if (auto it = known.find(key); it != known.end()) return it->second;
  std::string two;
  AppendUtf8(&two, prev);
  AppendUtf8(&two, cp);
  std::string nfc;
  AppendNfcWhole(two, &nfc);
  const bool joins = nfc != two;
  if (known.size() >= 4096) known.clear();
  known.emplace(key, joins);
  return joins;
}

}  // namespace

size_t NfcQuickEnd(std::string_view sv, size_t from) {
  const auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  const CharClasses& cls = CharClasses::Get();
  size_t n = sv.size(), i = from;
  int last_ccc = 0;
  while (i < n) {
    if (s[i] < 0x80) {  // ASCII: on to the next byte that is not
      i = NextNonAscii(s, i + 1, n);
      last_ccc = 0;
      continue;
    }
    if (s[i] < 0xCC) {  // every code point below U+0300 is NFC_QC=Yes with ccc 0
      i += 2;
      last_ccc = 0;
      continue;
    }
    if (s[i] >= 0xE4 && s[i] <= 0xE9) {  // U+4000..U+9FFF: the same (unicode_test.cc checks)
      i += 3;
      last_ccc = 0;
      continue;
    }
    // Other characters of two and three bytes (valid UTF-8: the bytes are there) that
    // are inert: one bit each, with no general decoding.
    if (s[i] < 0xE0) {
      if (cls.NfcInert((static_cast<uint32_t>(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F))) {
        i += 2;
        last_ccc = 0;
        continue;
      }
    } else if (s[i] < 0xF0) {
      if (cls.NfcInert((static_cast<uint32_t>(s[i] & 0x0F) << 12) |
                       (static_cast<uint32_t>(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F))) {
        i += 3;
        last_ccc = 0;
        continue;
      }
    }
    uint32_t cp;
    const size_t start = i;
    i += DecodeUtf8(s + i, &cp);
    uint8_t c = cls.Of(cp);
    if (c & kClassNfcQc) {
      // A Maybe of class 0 (no decomposition) can join only the character right
      // before it (any character between would block it): where the two do not
      // compose, the text is NFC through it, as text passing the check is. At
      // `from` the character before may be one the caller changed: stop there.
      if (!(c & kClassNfcMaybeStarter) || start == from) return start;
      size_t p = start - 1;
      while (p > 0 && (s[p] & 0xC0) == 0x80) --p;
      uint32_t prev;
      DecodeUtf8(s + p, &prev);
      if (JoinsPrevious(prev, cp)) return start;
      last_ccc = 0;
      continue;
    }
    if (!(c & kClassCombining)) {
      last_ccc = 0;
      continue;
    }
    int ccc = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class;
    if (last_ccc > ccc) return start;
    last_ccc = ccc;
  }
  return n;
}

bool IsNfcQuick(std::string_view s) { return NfcQuickEnd(s) == s.size(); }

namespace {

// NFC (or with `compat`, NFKC) of valid UTF-8 through utf8proc.
void AppendComposed(std::string_view s, bool compat, std::string* out) {
  // Characters assigned after Unicode 9.0 are inert in HF's tables: stand in
  // a noncharacter (ccc 0, no decomposition, composes with nothing) for each,
  // normalize, and put them back in order (normalization never moves a
  // character of ccc 0 across another).
  const CharClasses& cls = CharClasses::Get();
  constexpr uint32_t kStandIn = 0xFDD0;
  std::string masked;
  std::vector<uint32_t> originals;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len = DecodeUtf8(p + i, &cp);
    if ((cls.Of(cp) & kClassPost9) || cp == kStandIn) {
      originals.push_back(cp);
      AppendUtf8(&masked, kStandIn);
    } else {
      masked.append(s.data() + i, len);
    }
    i += len;
  }
  utf8proc_uint8_t* res = nullptr;
  utf8proc_ssize_t len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(masked.data()),
                   static_cast<utf8proc_ssize_t>(masked.size()), &res,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE |
                                                  (compat ? UTF8PROC_COMPAT : 0)));
  if (len < 0 || res == nullptr) {  // cannot happen for valid UTF-8; keep the text
    out->append(s);
    return;
  }
  std::string_view nfc(reinterpret_cast<const char*>(res), static_cast<size_t>(len));
  size_t next = 0;
  for (size_t i = 0; i < nfc.size();) {
    uint32_t cp;
    size_t l = DecodeUtf8(reinterpret_cast<const unsigned char*>(nfc.data()) + i, &cp);
    if (cp == kStandIn && next < originals.size()) {
      AppendUtf8(out, originals[next++]);
    } else {
      out->append(nfc.data() + i, l);
    }
    i += l;
  }
  std::free(res);
}

}  // namespace

namespace {

// A character normalization never joins to what comes before it: ccc 0 and
// NFC_QC=Yes (ICU's "composition boundary before"). NFC of a text is the NFC
// of its stretches between such characters, joined.
bool IsNfcBoundary(uint8_t cls) { return !(cls & (kClassCombining | kClassNfcQc)); }

// The start of the last boundary character before byte p of valid UTF-8 s, no
// earlier than `from` (itself a boundary).
size_t NfcBoundaryBefore(std::string_view s, size_t from, size_t p) {
  const CharClasses& cls = CharClasses::Get();
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  while (p > from) {
    size_t start = p - 1;
    while (start > from && (u[start] & 0xC0) == 0x80) --start;
    uint32_t cp;
    DecodeUtf8(u + start, &cp);
    if (IsNfcBoundary(cls.Of(cp))) return start;
    p = start;
  }
  return from;
}

// The start of the first boundary character after the one at byte p (s.size()
// if none).
size_t NfcBoundaryAfter(std::string_view s, size_t p) {
  const CharClasses& cls = CharClasses::Get();
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  uint32_t cp;
  p += DecodeUtf8(u + p, &cp);
  while (p < s.size()) {
    size_t len = DecodeUtf8(u + p, &cp);
    if (IsNfcBoundary(cls.Of(cp))) return p;
    p += len;
  }
  return s.size();
}

}  // namespace

void AppendNfcFrom(std::string_view s, size_t quick_end, std::string* out) {
  // Only the stretches around the characters the quick check stops at go
  // through the tables: text passing the check is NFC as it is. Stretches less
  // than kJoin bytes apart are normalized together (one call instead of many
  // in scripts where such characters are frequent).
  constexpr size_t kJoin = 256;
  size_t from = 0, p = quick_end;
  while (p < s.size()) {
    const size_t begin = NfcBoundaryBefore(s, from, p);
    out->append(s.substr(from, begin - from));
    size_t end = NfcBoundaryAfter(s, p);
    p = NfcQuickEnd(s, end);
    while (p < s.size() && NfcBoundaryBefore(s, end, p) - end <= kJoin) {
      end = NfcBoundaryAfter(s, p);
      p = NfcQuickEnd(s, end);
    }
    AppendComposed(s.substr(begin, end - begin), false, out);
    from = end;
  }
  out->append(s.substr(from));
}

void AppendNfc(std::string_view s, std::string* out) { AppendNfcFrom(s, NfcQuickEnd(s), out); }

void AppendNfcWhole(std::string_view s, std::string* out) { AppendComposed(s, false, out); }

void AppendNfkc(std::string_view s, std::string* out) {
  // ASCII is NFKC; anything else goes through the tables.
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    out->append(s);
    return;
  }
  AppendComposed(s, true, out);
}

std::vector<std::pair<uint32_t, uint32_t>> CategoryRanges(std::string_view name) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  if (name.empty() || name.size() > 2) return out;
  for (const CategoryRun& r : kCategoryRuns) {
    std::string_view cat = kCategoryNames[r.cat];
    if (name.size() == 1 ? cat[0] != name[0] : cat != name) continue;
    if (!out.empty() && out.back().second + 1 == r.lo) {
      out.back().second = r.hi;
    } else {
      out.emplace_back(r.lo, r.hi);
    }
  }
  return out;
}

bool IsWhiteSpace(uint32_t cp) { return CharClasses::Get().Of(cp) & kClassSpace; }

bool IsAlphanumeric(uint32_t cp) {
  // Rust: Alphabetic || Numeric. Alphabetic = L + Nl + Other_Alphabetic; we
  // approximate Other_Alphabetic by spacing and non-spacing marks (Mn, Mc).
  if (CharClasses::Get().Of(cp) & (kClassLetter | kClassNumber)) return true;
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC;
}

}  // namespace ek::tokenize
