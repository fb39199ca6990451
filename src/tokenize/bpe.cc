#include "tokenize/bpe.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "core/prefetch.h"
#include "core/utf8.h"

namespace ek::tokenize {

namespace {
uint64_t HashBytes(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

size_t PowerOfTwoAtLeast(size_t n) {
  size_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

// Words up to this many bytes use the quadratic scan; longer ones the heap.
constexpr size_t kShortWord = 48;
}  // namespace

void BytesToId::Build(const std::vector<std::string>& keys, const std::vector<bool>& present) {
  keys_ = &keys;
  keys_unique_ = true;
  size_t count = 0;
  for (size_t i = 0; i < keys.size(); ++i) count += present[i];
  size_t cap = PowerOfTwoAtLeast(count * 2 + 1);
  slots_.assign(cap, Slot{0, -1});
  mask_ = cap - 1;
  bloom_.Reset();
  // In id order (a repeated key keeps its first id), a chunk's slots fetched ahead.
  constexpr size_t kChunk = 32;
  uint64_t hash[kChunk];
  for (size_t base = 0; base < keys.size(); base += kChunk) {
    const size_t n = std::min(kChunk, keys.size() - base);
    for (size_t j = 0; j < n; ++j) {
      hash[j] = present[base + j] ? HashBytes(keys[base + j]) : 0;
      __builtin_prefetch(&slots_[hash[j] & mask_]);
    }
    for (size_t j = 0; j < n; ++j) {
      const size_t i = base + j;
      if (!present[i]) continue;
      const uint64_t h = hash[j];
      bloom_.Add(h);
      size_t pos = h & mask_;
      while (slots_[pos].id >= 0) {
        if (slots_[pos].hash == h && keys[static_cast<size_t>(slots_[pos].id)] == keys[i]) break;
        pos = (pos + 1) & mask_;
      }
      if (slots_[pos].id < 0) {
        slots_[pos] = Slot{h, static_cast<int32_t>(i)};
      } else {
        keys_unique_ = false;
      }
    }
  }
}

int32_t BytesToId::Find(std::string_view key) const {
  if (slots_.empty()) return -1;
  uint64_t h = HashBytes(key);
  if (!bloom_.MayHold(h)) return -1;
  size_t pos = h & mask_;
  while (true) {
    const Slot& s = slots_[pos];
    if (s.id < 0) return -1;
    if (s.hash == h && (*keys_)[static_cast<size_t>(s.id)] == key) return s.id;
    pos = (pos + 1) & mask_;
  }
}

Status BpeModel::Init(std::vector<std::string> tokens, std::vector<bool> present,
                      const std::vector<std::pair<int32_t, int32_t>>& merges, bool ignore_merges) {
  EK_RETURN_IF_ERROR(InitVocab(std::move(tokens), std::move(present), ignore_merges));
  return InitMerges(merges);
}

Status BpeModel::InitVocab(std::vector<std::string> tokens, std::vector<bool> present,
                           bool ignore_merges, bool byte_level) {
  if (tokens.size() >= (1u << kIdBits) - 1) {
    return UnsupportedError(fmt::format("model.vocab: ids up to {} (at most {} supported)",
                                        tokens.size() - 1, (1u << kIdBits) - 2));
  }
  tokens_ = std::move(tokens);
  present_ = std::move(present);
  ignore_merges_ = ignore_merges;
  vocab_count_ = static_cast<size_t>(std::count(present_.begin(), present_.end(), true));
  vocab_.Build(tokens_, present_);
  if (!byte_level) {
    std::fill(std::begin(byte_id_), std::end(byte_id_), -1);
    return Status::Ok();
  }
  for (int b = 0; b < 256; ++b) {
    char c = static_cast<char>(b);
    byte_id_[b] = vocab_.Find(std::string_view(&c, 1));
    if (byte_id_[b] < 0) {
      return UnsupportedError(fmt::format(
          "model.vocab has no token for byte 0x{:02X}: not a complete byte-level vocabulary", b));
    }
  }
  return Status::Ok();
}

Status BpeModel::InitMerges(std::span<const std::pair<int32_t, int32_t>> merges) {
  if (merges.size() >= (1u << 24) - 1) {
    return UnsupportedError(fmt::format("model.merges: {} merges (at most 16M)", merges.size()));
  }
  // First each merge's token, in chunks of merges, the tokens of a chunk fetched ahead.
  // Merged tokens come in id order: a merge makes the token the merge before it made
  // (another way to the same token) or the id after that one (every merge of Qwen2/3
  // and Llama 3, all but 0.3% of Gemma 3's). With no key repeated in the vocabulary (no
  // real file repeats one), a guess whose bytes are the pair's is the id a lookup would
  // give, so only a merge that is neither is looked up.
  std::vector<int32_t, HugeFriendlyAllocator<int32_t>> merged_by_rank(merges.size(), -1);
  constexpr size_t kChunk = 64;
  std::string joined;
  int32_t last = -1;  // the merged token of the merge before
  auto is_pair = [this](int32_t id, std::string_view a, std::string_view b) {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[static_cast<size_t>(id)])
      return false;
    const std::string& t = tokens_[static_cast<size_t>(id)];
    // (memcmp, not std::string::compare(pos, n, ...): that one is a call of its own
    // that checks the position again, for 560,000 compares of Llama 3's merges.)
    return t.size() == a.size() + b.size() && std::memcmp(t.data(), a.data(), a.size()) == 0 &&
           std::memcmp(t.data() + a.size(), b.data(), b.size()) == 0;
  };
  const bool guess = vocab_.keys_unique();
  // The tokens of a chunk's merges are fetched while the chunk before is read.
  auto prefetch_chunk = [&](size_t base) {
    for (size_t i = base; i < std::min(base + kChunk, merges.size()); ++i) {
      Prefetch(&tokens_[static_cast<size_t>(merges[i].first)]);
      Prefetch(&tokens_[static_cast<size_t>(merges[i].second)]);
    }
  };
  prefetch_chunk(0);
  for (size_t base = 0; base < merges.size(); base += kChunk) {
    const size_t n = std::min(kChunk, merges.size() - base);
    const std::pair<int32_t, int32_t>* chunk = merges.data() + base;
    int32_t* found = merged_by_rank.data() + base;
    prefetch_chunk(base + kChunk);
    for (size_t i = 0; i < n; ++i) {
      const std::string& a = tokens_[static_cast<size_t>(chunk[i].first)];
      const std::string& b = tokens_[static_cast<size_t>(chunk[i].second)];
      if (guess && last >= 0 && is_pair(last, a, b)) {
        found[i] = last;
      } else if (guess && last >= 0 && is_pair(last + 1, a, b)) {
        found[i] = last + 1;
      } else {  // looked up: the next merge's guess starts from it
        joined.assign(a).append(b);
        found[i] = vocab_.Find(joined);
      }
      last = found[i];
    }
    for (size_t i = 0; i < n; ++i) {
      if (found[i] < 0) {
        return InvalidArgumentError(
            fmt::format("model.merges[{}]: the merged token is not in model.vocab", base + i));
      }
    }
  }
  merge_count_ = merges.size();
  // Codes, where the merged ids never decrease with the rank: merged id << shift
  // | the merge's place among those making the same token. The shift is the
  // fewest bits that place takes; code and pair must fit 64 bits. Only the table
  // of the kind chosen is built (its memory is fresh: with huge pages, the first
  // touch of each 2 MiB is slow on virtual machines).
  code_shift_ = -1;
  std::vector<uint32_t, HugeFriendlyAllocator<uint32_t>> order_by_rank(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank)
    order_by_rank[rank] = static_cast<uint32_t>(rank);
  bool rising = !merges.empty();
  uint32_t most_places = 1;  // the most merges making one token
  for (size_t rank = 1, run = 1; rank < merges.size() && rising; ++rank) {
    rising = merged_by_rank[rank] >= merged_by_rank[rank - 1];
    run = merged_by_rank[rank] == merged_by_rank[rank - 1] ? run + 1 : 1;
    most_places = std::max(most_places, static_cast<uint32_t>(run));
  }
  int shift = 0;
  while ((uint32_t{1} << shift) < most_places) ++shift;
  if (rising && ((static_cast<uint64_t>(merged_by_rank.back()) + 1) << shift) <=
                    (uint64_t{1} << (64 - 2 * kIdBits))) {
    for (size_t rank = 0, place = 0; rank < merges.size(); ++rank) {
      place = rank > 0 && merged_by_rank[rank] == merged_by_rank[rank - 1] ? place + 1 : 0;
      order_by_rank[rank] =
          (static_cast<uint32_t>(merged_by_rank[rank]) << shift) | static_cast<uint32_t>(place);
    }
    code_shift_ = shift;
  }
  const size_t cap = PowerOfTwoAtLeast(merges.size() + merges.size() / 4 + 1);
  merge_mask_ = cap - 1;
  shift_ = 64 - __builtin_ctzll(cap);
  merge_slots_ = {};
  pair_codes_ = {};
  if (code_shift_ >= 0) {
    pair_codes_.assign(cap, kEmptySlot);
  } else {
    merge_slots_.assign(cap, MergeSlot{});
  }
  bloom_.Reset();
  // Then the slots, the next chunk's fetched while a chunk is filled in. A repeated
  // pair keeps the later rank, as HF's HashMap collect does.
  uint64_t pair_keys[2][kChunk], mixes[2][kChunk];
  auto fetch_chunk = [&](size_t base, uint64_t* key, uint64_t* mixed) {
    for (size_t i = 0; i < kChunk && base + i < merges.size(); ++i) {
      key[i] = PairKey(merges[base + i].first, merges[base + i].second);
      mixed[i] = key[i] * 0x9E3779B97F4A7C15ull;
      if (code_shift_ >= 0) {
        __builtin_prefetch(&pair_codes_[mixed[i] >> shift_]);
      } else {
        __builtin_prefetch(&merge_slots_[mixed[i] >> shift_]);
      }
    }
  };
  fetch_chunk(0, pair_keys[0], mixes[0]);
  for (size_t base = 0, c = 0; base < merges.size(); base += kChunk, c ^= 1) {
    const size_t n = std::min(kChunk, merges.size() - base);
    const uint64_t* key = pair_keys[c];
    const uint64_t* mixed = mixes[c];
    fetch_chunk(base + kChunk, pair_keys[c ^ 1], mixes[c ^ 1]);
    for (size_t i = 0; i < n; ++i) {
      const size_t rank = base + i;
      bloom_.Add(mixed[i]);
      uint64_t h = mixed[i] >> shift_;
      if (code_shift_ >= 0) {
        while (pair_codes_[h] != kEmptySlot && (pair_codes_[h] & kKeyMask) != key[i])
          h = (h + 1) & merge_mask_;
        pair_codes_[h] = key[i] | (static_cast<uint64_t>(order_by_rank[rank]) << (2 * kIdBits));
      } else {
        while (merge_slots_[h].pair_rank != kEmptySlot &&
               (merge_slots_[h].pair_rank & kKeyMask) != key[i])
          h = (h + 1) & merge_mask_;
        merge_slots_[h] = MergeSlot{key[i] | (static_cast<uint64_t>(rank) << (2 * kIdBits)),
                                    merged_by_rank[rank], 0};
      }
    }
  }
  // Dense table for pairs of byte tokens when those are ids 0..255 (the norm).
  // (Without byte tokens every byte_id_ is -1: the table still holds the ranks
  // of pairs of ids below 256, the byte-fallback tokens of SentencePiece ones.)
  byte_pair_dense_ = false;
  bool bytes_low = true;
  for (int b = 0; b < 256; ++b) bytes_low &= byte_id_[b] < 256;
  byte_pair_rank_ = {};
  byte_pair_code_ = {};
  if (bytes_low) {
    if (code_shift_ >= 0) {
      byte_pair_code_.assign(1u << 16, kNoMerge);
    } else {
      byte_pair_rank_.assign(1u << 16, kNoMerge);
    }
    for (uint32_t l = 0; l < 256; ++l) {
      for (uint32_t r = 0; r < 256; ++r) {
        int32_t merged = -1;
        const uint32_t rank = RankMerged(static_cast<int32_t>(l), static_cast<int32_t>(r), &merged);
        if (code_shift_ >= 0) {
          byte_pair_code_[(l << 8) | r] = rank;  // the code (codes fit 24 bits: no kNoMerge)
        } else {
          byte_pair_rank_[(l << 8) | r] =
              rank | (static_cast<uint64_t>(static_cast<uint32_t>(merged)) << 32);
        }
      }
    }
    byte_pair_dense_ = true;
  }
  BuildAtoms(merges, order_by_rank);
  return Status::Ok();
}

// Atoms. A character c of 2 or 3 bytes whose bytes merge, on their own, into
// one token T starts a word as T (saving the merges and, for the quadratic
// scan, most of the word's length) when its neighbours in the word are
// multi-byte characters or nothing, and every merge on the way to T (ranks up
// to `most`) ranks below every merge that could join a symbol at c's left edge
// (any symbol that is ever c's first, T included) to a symbol ending in a
// continuation byte, or a symbol at its right edge to one starting with a lead
// byte. Why that is exact: while c is unfinished, one of its own pairs (rank
// <= most) is pending, so the lowest pair anywhere is c's or ranks below it,
// and no pair across c's edges (all above `most`) is taken: c becomes T as it
// does on its own, and every other choice is the one the word starting with T
// makes, where T's pairs with its neighbours also rank above `most`. The
// neighbour rule holds because words are whole characters: the symbol before
// c ends with the previous character's last byte, the one after starts with
// the next one's first.
void BpeModel::BuildAtoms(std::span<const std::pair<int32_t, int32_t>> merges,
                          std::span<const uint32_t> order_by_rank) {
  atoms_.clear();
  for (int b = 0; b < 256; ++b) {
    if (byte_id_[b] < 0) return;  // not a byte-level vocabulary
  }
  // Each token's edges, in one pass over the tokens: the merges below ask for the
  // tokens at random, and the 32-byte strings of 128,000 tokens are 4 MB, where these
  // two bits a token are 128 KB.
  // edges[id]: 1 when the token ends in a continuation byte, 2 when it starts with a lead byte.
  std::vector<uint8_t> edges(tokens_.size(), 0);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    if (t.empty()) continue;
    edges[id] = static_cast<uint8_t>(((static_cast<unsigned char>(t.back()) & 0xC0) == 0x80) |
                                     (static_cast<unsigned char>(t.front()) >= 0xC0 ? 2 : 0));
  }
  // min_left[t]: the lowest merge (x, t) with x ending in a continuation byte;
  // min_right[t]: the lowest (t, y) with y starting with a lead byte.
  std::vector<uint32_t> min_left(tokens_.size(), kNoMerge), min_right(tokens_.size(), kNoMerge);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    auto [a, b] = merges[rank];
    const uint32_t r = order_by_rank[rank];
    if (edges[static_cast<size_t>(a)] & 1) {
      min_left[static_cast<size_t>(b)] = std::min(min_left[static_cast<size_t>(b)], r);
    }
    if (edges[static_cast<size_t>(b)] & 2) {
      min_right[static_cast<size_t>(a)] = std::min(min_right[static_cast<size_t>(a)], r);
    }
  }
  // The characters of 2 or 3 bytes that are a token: one pass over the tokens, not a
  // lookup for each of the 63,000 code points (the lookups took ~3 ms of Qwen3's load).
  std::vector<bool> is_token(0x10000, false);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    uint32_t cp = 0;
    if (present_[id] && (t.size() == 2 || t.size() == 3) &&
        DecodeUtf8Checked(t, 0, &cp) == t.size()) {
      is_token[cp] = true;  // valid UTF-8 of that length: U+0080..U+FFFF, no surrogate
    }
  }
  std::vector<int32_t> atoms(0x10000, -1);
  bool any = false;
  std::string bytes;
  for (uint32_t cp = 0x80; cp < 0x10000; ++cp) {
    if (!is_token[cp]) continue;
    bytes.clear();
    AppendUtf8(&bytes, cp);
    int32_t sym[3];
    size_t n = bytes.size();
    for (size_t i = 0; i < n; ++i) sym[i] = byte_id_[static_cast<unsigned char>(bytes[i])];
    uint32_t most = 0, left_edge = min_left[static_cast<size_t>(sym[0])],
             right_edge = min_right[static_cast<size_t>(sym[n - 1])];
    while (n > 1) {
      uint32_t best = kNoMerge;
      size_t at = 0;
      int32_t made = -1;
      for (size_t i = 0; i + 1 < n; ++i) {
        int32_t merged = -1;
        uint32_t r = RankMerged(sym[i], sym[i + 1], &merged);
        if (r < best) {
          best = r;
          at = i;
          made = merged;
        }
      }
      if (best == kNoMerge) break;
      most = std::max(most, best);
      sym[at] = made;
      for (size_t i = at + 1; i + 1 < n; ++i) sym[i] = sym[i + 1];
      --n;
      left_edge = std::min(left_edge, min_left[static_cast<size_t>(sym[0])]);
      right_edge = std::min(right_edge, min_right[static_cast<size_t>(sym[n - 1])]);
    }
    if (n == 1 && most < left_edge && most < right_edge) {
      atoms[cp] = sym[0];
      any = true;
    }
  }
  if (any) atoms_ = std::move(atoms);
}

size_t BpeModel::FirstSymbols(std::string_view word, BpeScratch* s) const {
  size_t n = word.size();
  s->sym.resize(n);
  int32_t* sym = s->sym.data();
  const auto* p = reinterpret_cast<const unsigned char*>(word.data());
  if (atoms_.empty() || plain_) {
    for (size_t i = 0; i < n; ++i) sym[i] = byte_id_[p[i]];
    return n;
  }
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c >= 0xC2 && c < 0xF0) {
      size_t len = c < 0xE0 ? 2 : 3;
      // Whole, with multi-byte characters (or nothing) on both sides.
      if (i + len <= n && (p[i + 1] & 0xC0) == 0x80 && (len == 2 || (p[i + 2] & 0xC0) == 0x80) &&
          (i == 0 || p[i - 1] >= 0x80) && (i + len == n || p[i + len] >= 0xC0)) {
        uint32_t cp;
        DecodeUtf8(p + i, &cp);
        if (int32_t a = atoms_[cp]; a >= 0) {
          sym[k++] = a;
          i += len;
          continue;
        }
      }
    }
    sym[k++] = byte_id_[c];
    ++i;
  }
  return k;
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* out, BpeScratch* scratch,
                          bool not_a_key) const {
  size_t n = word.size();
  if (n == 1) {
    out->push_back(byte_id_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_ && !not_a_key) {
    int32_t id = vocab_.Find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  n = FirstSymbols(word, scratch);
  MergeSymbols(n, out, scratch);
}

void BpeModel::MergeSymbols(size_t n, std::vector<int32_t>* out, BpeScratch* scratch) const {
  if (n == 1) {
    out->push_back(scratch->sym[0]);
  } else if (n <= kShortWord && !plain_) {
    MergeShort(n, out, scratch);
  } else {
    MergeLong(n, out, scratch);
  }
}

// Quadratic scan: find the lowest-rank adjacent pair (leftmost on ties), merge,
// repeat. Same order as the heap in HF's merge_all. Symbols keep their places
// (a merge marks its right one gone and relinks: no shifting), so each pair's
// rank and place pack into one key, rank << 8 | place, and the lowest key is
// the lowest rank at its leftmost place: one branch-free pass over the word
// finds the next merge.
void BpeModel::MergeShort(size_t n, std::vector<int32_t>* out, BpeScratch* s) const {
  int32_t* sym = s->sym.data();
  constexpr uint64_t kNone = ~0ull;
  uint64_t key[kShortWord];    // of the pair starting at each live place; kNone: none
  int32_t merged[kShortWord];  // what that pair merges into, where it does
  uint8_t next[kShortWord], prev[kShortWord];
  auto key_of = [](uint32_t rank, size_t at) {
    return rank == kNoMerge ? kNone : (static_cast<uint64_t>(rank) << 8) | at;
  };
  for (size_t i = 0; i < n; ++i) {
    next[i] = static_cast<uint8_t>(i + 1);
    prev[i] = static_cast<uint8_t>(i - 1);  // 255 before the first
  }
  for (size_t i = 0; i + 1 < n; ++i) key[i] = key_of(RankMerged(sym[i], sym[i + 1], &merged[i]), i);
  key[n - 1] = kNone;
  while (true) {
    uint64_t best = kNone;
    for (size_t i = 0; i + 1 < n; ++i) best = std::min(best, key[i]);
    if (best == kNone) break;
    const size_t at = best & 0xFF, right = next[at], after = next[right];
    sym[at] = merged[at];
    key[right] = kNone;
    next[at] = static_cast<uint8_t>(after);
    if (after < n) prev[after] = static_cast<uint8_t>(at);
    const size_t before = prev[at];
    // The two new pairs' slots load together, not one after the other.
    if (after < n) PrefetchPair(sym[at], sym[after]);
    if (before < n) PrefetchPair(sym[before], sym[at]);
    key[at] = after < n ? key_of(RankMerged(sym[at], sym[after], &merged[at]), at) : kNone;
    if (before < n) key[before] = key_of(RankMerged(sym[before], sym[at], &merged[before]), before);
  }
  for (size_t i = 0; i < n; i = next[i]) out->push_back(sym[i]);
}

// Heap of (rank, position) with linked symbols, as HF's merge_all; stale
// entries are detected by re-looking up the pair.
void BpeModel::MergeLong(size_t n, std::vector<int32_t>* out, BpeScratch* s) const {
  std::vector<int32_t>& sym = s->sym;
  std::vector<int32_t>& prev = s->prev;
  std::vector<int32_t>& next = s->next;
  std::vector<uint64_t>& heap = s->heap;
  prev.resize(n);
  next.resize(n);
  heap.clear();
  auto greater = [](uint64_t a, uint64_t b) { return a > b; };
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    if (i + 1 < n) {
      uint32_t r = Rank(sym[i], sym[i + 1]);
      if (r != kNoMerge) heap.push_back((static_cast<uint64_t>(r) << 32) | i);
    }
  }
  std::make_heap(heap.begin(), heap.end(), greater);
  constexpr int32_t kDead = -2;  // prev[] marker for merged-away symbols
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), greater);
    uint64_t top = heap.back();
    heap.pop_back();
    size_t pos = top & 0xFFFFFFFFu;
    uint32_t rank = static_cast<uint32_t>(top >> 32);
    if (prev[pos] == kDead || next[pos] < 0) continue;
    size_t right = static_cast<size_t>(next[pos]);
    int32_t merged = -1;
    if (RankMerged(sym[pos], sym[right], &merged) != rank) continue;  // stale
    sym[pos] = merged;
    prev[right] = kDead;
    next[pos] = next[right];
    if (next[right] >= 0) prev[static_cast<size_t>(next[right])] = static_cast<int32_t>(pos);
    if (prev[pos] >= 0) {
      size_t p = static_cast<size_t>(prev[pos]);
      uint32_t pr = Rank(sym[p], sym[pos]);
      if (pr != kNoMerge) {
        heap.push_back((static_cast<uint64_t>(pr) << 32) | p);
        std::push_heap(heap.begin(), heap.end(), greater);
      }
    }
    if (next[pos] >= 0) {
      uint32_t nr = Rank(sym[pos], sym[static_cast<size_t>(next[pos])]);
      if (nr != kNoMerge) {
        heap.push_back((static_cast<uint64_t>(nr) << 32) | pos);
        std::push_heap(heap.begin(), heap.end(), greater);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (prev[i] != kDead) out->push_back(sym[i]);
  }
}

}  // namespace ek::tokenize
