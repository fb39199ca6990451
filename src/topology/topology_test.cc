#include "topology/topology.h"

#include <gtest/gtest.h>

namespace ek::run {
namespace {

TEST(TopologyTest, RanksAreNodeMajorAsTorchrunAssigns) {
  Topology t(2, 8, {"b300-a", "b300-b"});
  EXPECT_EQ(t.world(), 16);
  EXPECT_EQ(t.FirstRank(1), 8);
  EXPECT_EQ(t.EndRank(1), 16);
  EXPECT_EQ(t.RanksOf(0).size(), 8u);
  EXPECT_EQ(t.NodeOf(11), 1);
  EXPECT_EQ(t.LocalRank(11), 3);
  EXPECT_EQ(t.Rank("b300-b", 3), 11);
  EXPECT_EQ(t.RankName(11), "b300-b:3");
  EXPECT_EQ(t.NodeOfHost("b300-a"), 0);
}

TEST(TopologyTest, OutOfRangeIsNeverARank) {
  Topology t(2, 4);
  EXPECT_EQ(t.NodeOf(-1), -1);
  EXPECT_EQ(t.NodeOf(8), -1);
  EXPECT_EQ(t.LocalRank(8), -1);
  EXPECT_TRUE(t.RanksOf(2).empty());
  EXPECT_TRUE(t.RanksOf(-1).empty());
  EXPECT_EQ(t.Rank("node-0", 0), -1);  // unnamed hosts are not looked up
  EXPECT_EQ(t.HostOf(1), "node-1");
  EXPECT_EQ(t.RankName(9), "rank 9");
  Topology named = Topology::FromHosts({"a", "b"}, 2);
  EXPECT_EQ(named.Rank("a", 2), -1);
  EXPECT_EQ(named.Rank("c", 0), -1);
  EXPECT_EQ(named.Rank("b", 1), 3);
}

}  // namespace
}  // namespace ek::run
