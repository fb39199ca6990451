#include "pack/bfd.h"

#include <algorithm>
#include <bit>

#include "core/random.h"

namespace ek::pack {

uint64_t BfdPlan::fill(uint64_t b) const {
  uint64_t n = 0;
  for (uint64_t i = bin_start[b]; i < bin_start[b + 1]; ++i) n += pieces[i].length;
  return n;
}

namespace {

// The rooms 1..max that some open bin has, by a max segment tree over the
// leaves (room r at leaf r - 1): the smallest room >= a length in O(log max).
// As in "Fewer Truncations Improve Language Modeling" (Ding et al., ICML 2024)
// and TRL's _SegmentTree.
class RoomTree {
 public:
  explicit RoomTree(uint32_t max) : size_(std::bit_ceil(std::max<uint32_t>(max, 1))) {
    tree_.assign(2 * static_cast<size_t>(size_), 0);
  }
  void Set(uint32_t room, bool present) {
    size_t i = size_ + room - 1;
    tree_[i] = present ? room : 0;
    for (i >>= 1; i >= 1; i >>= 1) tree_[i] = std::max(tree_[2 * i], tree_[2 * i + 1]);
  }
  // The smallest room >= length (precondition: one exists).
  uint32_t Search(uint32_t length) const {
    size_t i = 1;
    while (i < size_) i = tree_[2 * i] >= length ? 2 * i : 2 * i + 1;
    return tree_[i];
  }

 private:
  uint32_t size_;
  std::vector<uint32_t> tree_;
};

struct Item {
  uint32_t length;
  uint32_t piece;  // index within its document
  uint64_t tie;    // the document's place in the seeded order
  uint64_t doc;
};

}  // namespace

BfdPlan PlanBfd(const std::vector<uint32_t>& lengths, uint32_t seq_len, uint64_t seed) {
  BfdPlan plan;
  const uint64_t n = lengths.size();
  const std::vector<uint64_t> order = Permutation(seed, 0, n, true);  // order[k]: k-th document
  std::vector<uint64_t> tie(n);
  for (uint64_t k = 0; k < n; ++k) tie[order[k]] = k;
  std::vector<Item> items;
  items.reserve(n);
  for (uint64_t d = 0; d < n; ++d) {
    const uint32_t len = lengths[d];
    if (len > seq_len) ++plan.split_documents;
    for (uint32_t p = 0, at = 0; at < len; ++p, at += seq_len) {
      items.push_back({std::min(seq_len, len - at), p, tie[d], d});
    }
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.length != b.length) return a.length > b.length;
    if (a.tie != b.tie) return a.tie < b.tie;
    return a.piece < b.piece;
  });
  // Open bins by room: a FIFO list per room (head/tail by room, next by bin),
  // the earliest opened first, as TRL's deques.
  constexpr uint64_t kNone = UINT64_MAX;
  RoomTree rooms(seq_len);
  rooms.Set(seq_len, true);  // a new bin always has seq_len of room
  std::vector<uint64_t> head(static_cast<size_t>(seq_len) + 1, kNone), tail = head;
  std::vector<uint64_t> next, bin_fill;
  std::vector<uint64_t> bin_of(items.size());
  auto push = [&](uint32_t room, uint64_t bin) {
    next[bin] = kNone;
    if (tail[room] == kNone) {
      head[room] = bin;
      rooms.Set(room, true);
    } else {
      next[tail[room]] = bin;
    }
    tail[room] = bin;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const uint32_t len = items[i].length;
    const uint32_t room = rooms.Search(len);
    uint64_t bin;
    if (room < seq_len) {
      bin = head[room];
      head[room] = next[bin];
      if (head[room] == kNone) {
        tail[room] = kNone;
        rooms.Set(room, false);
      }
    } else {
      bin = bin_fill.size();
      bin_fill.push_back(0);
      next.push_back(kNone);
    }
    bin_of[i] = bin;
    bin_fill[bin] += len;
    const uint32_t left = room - len;
    if (left > 0) push(left, bin);
  }
  // Each bin's pieces in the order they were placed (a stable counting sort by bin).
  const uint64_t bins = bin_fill.size();
  plan.bin_start.assign(bins + 1, 0);
  for (uint64_t b : bin_of) ++plan.bin_start[b + 1];
  for (uint64_t b = 0; b < bins; ++b) plan.bin_start[b + 1] += plan.bin_start[b];
  std::vector<uint64_t> at(plan.bin_start.begin(), plan.bin_start.end() - 1);
  plan.pieces.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    plan.pieces[at[bin_of[i]]++] = {it.doc, it.piece * seq_len, it.length};
  }
  return plan;
}

}  // namespace ek::pack
