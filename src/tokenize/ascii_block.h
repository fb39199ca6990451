// The Llama 3 / Qwen2 split (pattern.cc's Cl100kPattern) over 64 bytes at once (ASCII,
// and the letters, marks and punctuation of other scripts):
// each byte's class as a bit of six 64-bit masks, the pieces' starts from whole-mask
// operations, the pieces read off with count-trailing-zeros. Branches follow blocks, not
// bytes: the byte-at-a-time matcher mispredicts where one kind of piece follows another,
// which in code and English prose is every few bytes. Private to src/tokenize.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenize/pattern.h"

namespace ek::tokenize {

// The pieces of the 64 bytes at p, where a piece starts at p and the 65th byte exists
// (the block never ends the text); where a character is a number or white space of another
// script (or does not end in the block, or an apostrophe comes right before a non-ASCII
// byte), of the bytes before it. A letter of another script is a run of letter bytes, and
// a mark, punctuation or symbol a run of punctuation bytes: a run is one piece whatever its
// bytes, and the rules below read runs, except a letter run's prefix: one character.
// Appends, as spans offset by `base`, each piece whose end is certain from these bytes
// alone, and returns the offset of the next piece's start (certain; its end is not), or 0
// when there is no certain start after p (fewer than 16 bytes before such a character, a
// run of 64 letter bytes): then *bytewise says how many bytes to match byte by byte
// before the next block (past the block's last non-ASCII byte, or all 64).
// `max_digits`: \p{N}{1,max_digits} (Llama 3: 3, Qwen2: 1).
//
// Why the starts are the matcher's (the regex, leftmost-first, restarted at each piece's
// end, has no lookbehind, so the pieces from p are those of the text from p):
//   a letter run starts a piece, or its prefix does: the character before it when that
//     is whitespace other than \r \n, or punctuation that starts a piece itself;
//   punctuation (anything not a letter, digit or whitespace) starts a piece where the
//     byte before it is neither punctuation (a run is one piece) nor ' ' (` ?[^\s..]+`);
//     its piece takes the \r \n right after the run;
//   an apostrophe that starts a piece before s t m d / re ve ll (any case) is a
//     contraction: the letters after it start the next piece;
//   digits start a piece every max_digits bytes of their run;
//   whitespace not taken by punctuation (its run of \r \n) starts a piece where its run
//     does; a run holding \r or \n ends its first piece after the last of them; the last
//     byte of a run is a piece of its own, or the prefix of the next one.
// tokenize_test's DifferentialTest checks the matcher with and without blocks against
// Oniguruma.
size_t Cl100kAsciiBlock(const unsigned char* p, int max_digits, uint32_t base,
                        std::vector<Span>* out, size_t* bytewise);

// For tests: whether the vector classifiers (AVX2 where the CPU has it, which the block
// then uses; SSE2) and the one that takes a byte at a time give the 64 bytes at p the same
// classes.
bool AsciiBlockClassifiersAgree(const unsigned char* p);

}  // namespace ek::tokenize
