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
#include <cstdlib>
#include <new>

namespace ek {

inline constexpr size_t kHugePage = size_t{2} << 20;
inline constexpr size_t kHugeFrom = size_t{1} << 20;

// Allocates `bytes` (see above); release with FreeHugeFriendly(p, bytes).
inline void* AllocHugeFriendly(size_t bytes) {
  if (bytes < kHugeFrom) {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = (bytes + kHugePage - 1) & ~(kHugePage - 1);
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p) throw std::bad_alloc();
  (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice: failure changes nothing
  return p;
}

inline void FreeHugeFriendly(void* p, size_t /*bytes*/) { std::free(p); }

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
