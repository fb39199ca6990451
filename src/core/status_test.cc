#include "core/status.h"

#include <gtest/gtest.h>

namespace ek {
namespace {

Result<int> Half(int v) {
  if (v % 2) return InvalidArgumentError("odd: " + std::to_string(v));
  return v / 2;
}

Result<int> Quarter(int v) {
  EK_ASSIGN_OR_RETURN(int h, Half(v));
  EK_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, PropagatesWithContext) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().WithContext("pack: a.jsonl:3").message(), "pack: a.jsonl:3: odd: 3");
}

TEST(StatusTest, OkStatusHasNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.WithContext("x").message(), "");
}

}  // namespace
}  // namespace ek
