// An allocator for large, randomly probed tables (the tokenizer's piece cache,
// merge table and vocabulary index): a block of 1 MiB or more is 2 MiB-aligned
// and advised to be backed by transparent huge pages (MADV_HUGEPAGE), so one TLB
// entry covers 2 MiB instead of 4 KiB. With 4 KiB pages a probe of a 32 MB table
// misses the TLB on most lookups and waits on a page walk besides the line
// itself. Smaller blocks come from malloc. Where the kernel gives no huge pages
// (THP "never"), the advice is ignored and nothing else changes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace ek {

inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kHugeFrom = size_t{1} << 20;

// `bytes` rounded up to whole huge pages.
inline size_t HugePageRounded(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

// Allocates `bytes` (see above); release with FreeHugeFriendly(p, bytes).
inline void* AllocHugeFriendly(size_t bytes) {
  if (bytes < kHugeFrom) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = HugePageRounded(bytes);
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
  (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice: failure changes nothing
  return p;
}

inline void FreeHugeFriendly(void* p, size_t /*bytes*/) { std::free(p); }

// `bytes` of fresh memory from the kernel, 2 MiB-aligned and advised as above, that
// reads as zero until written (an anonymous mapping: no heap block that held something);
// release with UnmapZeroed(p, bytes). For a table that grows in place into its reserved
// space: the part never used needs no clearing.
inline void* MapZeroed(size_t bytes) {
  const size_t rounded = HugePageRounded(bytes);
  void* m = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  // Trimmed to a 2 MiB boundary at both ends, so every huge page of it can be one.
  auto* base = static_cast<char*>(m);
  const size_t lead = (kHugePage - reinterpret_cast<uintptr_t>(base) % kHugePage) % kHugePage;
  if (lead) munmap(base, lead);
  munmap(base + lead + rounded, kHugePage - lead);
  (void)madvise(base + lead, rounded, MADV_HUGEPAGE);  // advice: failure changes nothing
  return base + lead;
}

inline void UnmapZeroed(void* p, size_t bytes) { munmap(p, HugePageRounded(bytes)); }

// The first 2 MiB boundary at or after `p`.
inline uintptr_t HugePageAbove(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
}

// Advises the whole huge pages within [p, p + bytes) of a block someone else allocated
// (a library's buffer, not yet touched) MADV_HUGEPAGE; the parts before the first and
// after the last 2 MiB boundary stay as they are. Advice: failure changes nothing.
inline void AdviseHugePages(const void* p, size_t bytes) {
  const uintptr_t begin = HugePageAbove(p);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHugePage - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// A std::allocator for vectors of such tables.
template <class T>
struct HugeFriendlyAllocator {
  using value_type = T;
  HugeFriendlyAllocator() = default;
  template <class U>
  HugeFriendlyAllocator(const HugeFriendlyAllocator<U>& /*other*/) {}  // NOLINT: as std::allocator
  T* allocate(size_t n) { return static_cast<T*>(AllocHugeFriendly(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreeHugeFriendly(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugeFriendlyAllocator<U>& /*other*/) const {
    return true;
  }
};

}  // namespace ek
