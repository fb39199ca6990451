#include "tokenize/ascii_block.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tokenize/unicode.h"

namespace ek::tokenize {

namespace {

// Bit k of each mask is byte k's class.
struct Classes {
  uint64_t high;     // not ASCII
  uint64_t letter;   // A-Z a-z
  uint64_t digit;    // 0-9
  uint64_t space;    // whitespace but \r \n: \t \v \f ' '
  uint64_t newline;  // \r \n
  uint64_t blank;    // ' '
  uint64_t apos;     // '
  uint64_t cont;     // 0x80-0xBF: a character's continuation byte
};

// The same, a byte at a time: where there is no SSE2, and to check the vector one.
Classes ClassifyBytewise(const unsigned char* p) {
  Classes c{};
  for (int k = 0; k < 64; ++k) {
    const unsigned char b = p[k];
    const uint64_t m = uint64_t{1} << k;
    if (b >= 0x80) c.high |= m;
    if (static_cast<unsigned char>((b | 0x20) - 'a') < 26) c.letter |= m;
    if (b >= '0' && b <= '9') c.digit |= m;
    if (b == '\n' || b == '\r') c.newline |= m;
    if (b == ' ') c.blank |= m;
    if (b == ' ' || (b >= 0x09 && b <= 0x0D && b != '\n' && b != '\r')) c.space |= m;
    if (b == '\'') c.apos |= m;
    if (b >= 0x80 && b < 0xC0) c.cont |= m;
  }
  return c;
}

#if defined(__SSE2__)
Classes Classify(const unsigned char* p) {
  Classes c{};
  const auto bit = [](__m128i m, int chunk) {
    return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(m))) << (16 * chunk);
  };
  const auto set = [](char x) { return _mm_set1_epi8(x); };
  for (int chunk = 0; chunk < 4; ++chunk) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * chunk));
    c.high |= bit(v, chunk);
    // Signed compares: right for ASCII, and a block with any other byte is not used.
    const __m128i lower = _mm_or_si128(v, set(0x20));
    c.letter |=
        bit(_mm_and_si128(_mm_cmpgt_epi8(lower, set('a' - 1)), _mm_cmpgt_epi8(set('z' + 1), lower)),
            chunk);
    c.digit |=
        bit(_mm_and_si128(_mm_cmpgt_epi8(v, set('0' - 1)), _mm_cmpgt_epi8(set('9' + 1), v)), chunk);
    const __m128i nl = _mm_or_si128(_mm_cmpeq_epi8(v, set('\n')), _mm_cmpeq_epi8(v, set('\r')));
    c.newline |= bit(nl, chunk);
    const __m128i blank = _mm_cmpeq_epi8(v, set(' '));
    c.blank |= bit(blank, chunk);
    const __m128i controls =  // 0x09..0x0D
        _mm_and_si128(_mm_cmpgt_epi8(v, set(0x08)), _mm_cmpgt_epi8(set(0x0E), v));
    c.space |= bit(_mm_or_si128(blank, _mm_andnot_si128(nl, controls)), chunk);
    c.apos |= bit(_mm_cmpeq_epi8(v, set('\'')), chunk);
    c.cont |= bit(_mm_cmplt_epi8(v, set(static_cast<char>(0xC0))), chunk);
  }
  return c;
}
#else
Classes Classify(const unsigned char* p) { return ClassifyBytewise(p); }
#endif

#if defined(__x86_64__)
// The same with AVX2, where the CPU has it: 32 bytes a step.
__attribute__((target("avx2"))) Classes ClassifyAvx2(const unsigned char* p) {
  Classes c{};
  for (int half = 0; half < 2; ++half) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * half));
    const auto bit = [half](__m256i m) __attribute__((target("avx2"))) {
      return static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(m))) << (32 * half);
    };
    c.high |= bit(v);
    const __m256i lower = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
    c.letter |= bit(_mm256_and_si256(_mm256_cmpgt_epi8(lower, _mm256_set1_epi8('a' - 1)),
                                     _mm256_cmpgt_epi8(_mm256_set1_epi8('z' + 1), lower)));
    c.digit |= bit(_mm256_and_si256(_mm256_cmpgt_epi8(v, _mm256_set1_epi8('0' - 1)),
                                    _mm256_cmpgt_epi8(_mm256_set1_epi8('9' + 1), v)));
    const __m256i nl = _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')),
                                       _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')));
    c.newline |= bit(nl);
    const __m256i blank = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(' '));
    c.blank |= bit(blank);
    const __m256i controls = _mm256_and_si256(_mm256_cmpgt_epi8(v, _mm256_set1_epi8(0x08)),
                                              _mm256_cmpgt_epi8(_mm256_set1_epi8(0x0E), v));
    c.space |= bit(_mm256_or_si256(blank, _mm256_andnot_si256(nl, controls)));
    c.apos |= bit(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\'')));
    c.cont |= bit(_mm256_cmpgt_epi8(_mm256_set1_epi8(static_cast<char>(0xC0)), v));
  }
  return c;
}
// (__builtin_cpu_init first: this may initialize before libgcc's own constructor has run,
// in the Python extension for one.)
const bool kHasAvx2 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}();
Classes ClassifyFast(const unsigned char* p) { return kHasAvx2 ? ClassifyAvx2(p) : Classify(p); }
#else
Classes ClassifyFast(const unsigned char* p) { return Classify(p); }
#endif

// A block with fewer ASCII bytes before its first other one is left to the byte-at-a-time
// matcher: too few pieces to pay for the classifying.
constexpr size_t kMinKnown = 16;

bool AsciiLetter(unsigned char b) { return static_cast<unsigned char>((b | 0x20) - 'a') < 26; }

// The length of the contraction (?i:'s|'t|'re|'ve|'m|'ll|'d) at p (p[0] == '\''), or 0.
int Contraction(const unsigned char* p) {
  if (!AsciiLetter(p[1])) return 0;
  const unsigned char a = p[1] | 0x20;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (!AsciiLetter(p[2])) return 0;
  const unsigned char b = p[2] | 0x20;
  if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// Characters of other scripts: adds the bytes of each non-ASCII character of the block
// that is a letter (\p{L}) to c->letter, and leaves those of one that is neither a letter,
// a number nor white space ("other": marks, punctuation, symbols, emoji) as punctuation,
// up to the first that is a number or white space, or does not end in the block, and
// returns where that one starts (64: none). The rules read letters and punctuation as
// runs (a run is one piece whatever its bytes), except the prefix of a letter run, one
// character, which Cl100kAsciiBlock finds for a character of more than one byte.
// Numbers (\p{N}{1,3} counts characters) and white space (\s+(?!\S) leaves the last
// character) of other scripts are left to the byte-at-a-time matcher. An apostrophe
// before a non-ASCII byte ends the block too: (?i:'s) takes "'ſ" (U+017F folds to s),
// which that matcher knows.
size_t OtherChars(const unsigned char* p, Classes* c) {
  const uint64_t apos_stop = c->apos & (c->high >> 1);
  const size_t limit = apos_stop ? static_cast<size_t>(__builtin_ctzll(apos_stop)) : 64;
  const CharClasses& cls = CharClasses::Get();
  for (uint64_t leads = c->high & ~c->cont; leads; leads &= leads - 1) {
    const auto k = static_cast<size_t>(__builtin_ctzll(leads));
    if (k >= limit) break;
    const size_t len = p[k] >= 0xF0 ? 4 : p[k] >= 0xE0 ? 3 : 2;
    if (k + len > 64) return k;
    uint32_t cp;
    DecodeUtf8(p + k, &cp);
    const uint8_t cl = cls.Of(cp);
    if (cl & (kClassNumber | kClassSpace)) return k;
    if (cl & kClassLetter) c->letter |= ((uint64_t{1} << len) - 1) << k;
  }
  return limit;
}

}  // namespace

bool AsciiBlockClassifiersAgree(const unsigned char* p) {
  const Classes b = ClassifyBytewise(p);
  auto agrees = [&b](const Classes& a) {
    return a.high == b.high && a.letter == b.letter && a.digit == b.digit && a.space == b.space &&
           a.newline == b.newline && a.blank == b.blank && a.apos == b.apos && a.cont == b.cont;
  };
#if defined(__x86_64__)
  if (kHasAvx2 && !agrees(ClassifyAvx2(p))) return false;
#endif
  return agrees(Classify(p)) && agrees(ClassifyFast(p));
}

size_t Cl100kAsciiBlock(const unsigned char* p, int max_digits, uint32_t base,
                        std::vector<Span>* out, size_t* bytewise) {
  Classes c = ClassifyFast(p);
  // Where no start is certain: past the block's last non-ASCII byte, or the whole block.
  *bytewise = c.high ? static_cast<size_t>(64 - __builtin_clzll(c.high)) : 64;
  // The bytes from the first character on that OtherChars stops at (a number or white
  // space of another script, ...) are not classified: the block is the bytes before it,
  // and they end as the block's end does, who knows where.
  const size_t known = c.high ? OtherChars(p, &c) : 64;
  if (known < kMinKnown) return 0;
  const uint64_t valid = known == 64 ? ~uint64_t{0} : (uint64_t{1} << known) - 1;
  for (uint64_t* m : {&c.letter, &c.digit, &c.space, &c.newline, &c.blank, &c.apos}) *m &= valid;
  // x << 1 is "the byte before has x": bit 0 reads as nothing, as at the start of a text.
  const uint64_t punct = ~(c.letter | c.digit | c.space | c.newline) & valid;  // and '
  const uint64_t punct_start = punct & ~(punct << 1) & ~(c.blank << 1);
  const uint64_t prefix = c.space | punct_start;
  const uint64_t letter_start = c.letter & ~(c.letter << 1);
  uint64_t starts =
      1 | (letter_start & ~(prefix << 1)) | ((letter_start & (prefix << 1)) >> 1) | punct_start;
  // A letter run after a character of other punctuation of more than one byte: its start
  // moves to that character's first byte where the character starts a piece (a run of one
  // character: a prefix).
  for (uint64_t after = letter_start & (c.cont << 1) & valid; after; after &= after - 1) {
    const auto at = static_cast<size_t>(__builtin_ctzll(after));
    const uint64_t leads_before = ~c.cont & ((uint64_t{1} << at) - 1);
    const auto lead = static_cast<size_t>(63 - __builtin_clzll(leads_before));
    if ((punct_start >> lead) & 1) starts = (starts & ~(uint64_t{1} << at)) | (uint64_t{1} << lead);
  }
  // A start below `cut` is certain: lookahead is two bytes (a contraction at known - 4
  // reads the byte at known - 2), with a margin of one.
  size_t cut = known - 3;
  // Contractions: the letters after one start the next piece.
  for (uint64_t a = c.apos & punct_start; a; a &= a - 1) {
    const auto k = static_cast<size_t>(__builtin_ctzll(a));
    if (k >= cut) break;
    if (const auto len = static_cast<size_t>(Contraction(p + k)); len && k + len < known) {
      if ((c.letter >> (k + len)) & 1) starts |= uint64_t{1} << (k + len);  // (any script)
    }
  }
  // Digits: every max_digits bytes of a run.
  const uint64_t digit_start = c.digit & ~(c.digit << 1);
  if (max_digits <= 1) {
    starts |= c.digit;
  } else {
    uint64_t full = c.digit;  // a digit with max_digits - 1 digits before it
    for (int d = 1; d < max_digits; ++d) full &= c.digit << d;
    for (uint64_t at = digit_start; at; at = (at << max_digits) & full) starts |= at;
  }
  // Whitespace. Punctuation's piece takes the \r \n right after it: `s` marks where such a
  // run begins; adding it to the newline mask carries through the run, clearing it.
  const uint64_t s = c.newline & ~(c.newline << 1) & (punct << 1);
  const uint64_t taken = c.newline & ~(c.newline + s);
  const uint64_t ws = (c.space | c.newline) & ~taken;
  starts |= ws & ~(ws << 1);               // a run's start
  starts |= c.space & ws & ~(ws >> 1);     // its last byte (at known - 1: past the cut)
  for (uint64_t r = c.newline & ws; r;) {  // after the last \r \n of a run holding one
    const auto q = static_cast<size_t>(__builtin_ctzll(r));
    const uint64_t rest = ~ws >> q;  // the run ends at the first byte not in it
    if (!rest) break;                // not in this block: past the cut below
    const size_t end = q + static_cast<size_t>(__builtin_ctzll(rest));  // below 64
    const uint64_t run = ((uint64_t{1} << end) - 1) & ~((uint64_t{1} << q) - 1);
    const auto last = static_cast<size_t>(63 - __builtin_clzll(r & run));
    if (last + 1 < end) starts |= uint64_t{1} << (last + 1);
    r &= ~run;
  }
  // A run that reaches the block's end ends who knows where: its starts after the first
  // are not certain.
  if ((ws >> (known - 1)) & 1) {
    const uint64_t not_ws = ~ws & valid;
    const size_t run_start = not_ws ? static_cast<size_t>(64 - __builtin_clzll(not_ws)) : 0;
    if (run_start < cut) cut = run_start;
  }
  starts &= (uint64_t{1} << cut) - 1;
  starts &= ~uint64_t{1};
  if (!starts) return 0;
  size_t from = 0;
  for (; starts; starts &= starts - 1) {
    const auto at = static_cast<size_t>(__builtin_ctzll(starts));
    out->push_back({base + static_cast<uint32_t>(from), base + static_cast<uint32_t>(at)});
    from = at;
  }
  return from;
}

}  // namespace ek::tokenize
