#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace ek {
namespace {

TEST(HugePagesTest, LargeBlocksAreHugePageAligned) {
  const size_t bytes = 3 * kHugePage + 5;
  void* p = AllocHugeFriendly(bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePage, 0u);
  // The whole block is writable.
  auto* c = static_cast<unsigned char*>(p);
  c[0] = 1;
  c[bytes - 1] = 2;
  EXPECT_EQ(c[0] + c[bytes - 1], 3);
  FreeHugeFriendly(p, bytes);
}

TEST(HugePagesTest, SmallBlocksComeFromMalloc) {
  void* p = AllocHugeFriendly(100);
  ASSERT_NE(p, nullptr);
  static_cast<char*>(p)[99] = 'x';
  FreeHugeFriendly(p, 100);
  void* z = AllocHugeFriendly(0);  // a valid, distinct pointer, as malloc(1)
  ASSERT_NE(z, nullptr);
  FreeHugeFriendly(z, 0);
}

TEST(HugePagesTest, VectorsGrowAndKeepTheirContents) {
  std::vector<uint64_t, HugeFriendlyAllocator<uint64_t>> v;
  for (uint64_t i = 0; i < 400000; ++i) v.push_back(i * 3);  // past kHugeFrom
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % kHugePage, 0u);
  for (uint64_t i = 0; i < v.size(); i += 997) ASSERT_EQ(v[i], i * 3);
  std::vector<uint64_t, HugeFriendlyAllocator<uint64_t>> w(v);
  EXPECT_EQ(w, v);
}

}  // namespace
}  // namespace ek
