#include "launch/cluster.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "core/fault_env.h"

namespace ek::launch {
namespace {

// A fake machine: these environment variables only, and SLURM host lists
// that expand to `hosts`.
struct Machine {
  std::shared_ptr<FaultInjectionEnv> env;
  NodelistExpander expand;
};

Machine MachineWith(std::map<std::string, std::string> vars, std::vector<std::string> hosts = {}) {
  Machine m{std::make_shared<FaultInjectionEnv>(ek::Env::Default()), nullptr};
  m.env->SetVars(std::move(vars));
  m.expand = [hosts](const std::string&) -> Result<std::vector<std::string>> { return hosts; };
  return m;
}

Result<Cluster> ResolveCluster(const run::RunFile& run, int node_rank_flag, const Machine& m) {
  return launch::ResolveCluster(run, node_rank_flag, m.env.get(), m.expand);
}

run::RunFile MakeRun(int nodes, int gpus, std::vector<std::string> hosts = {}) {
  auto r = run::ParseRunFile("", "/runs/run.toml");
  EXPECT_TRUE(r.ok());
  r->nodes = nodes;
  r->gpus_per_node = gpus;
  r->hosts = hosts;
  r->name = "sft";
  return *r;
}

TEST(ClusterTest, OneNodeIsStandalone) {
  auto c = ResolveCluster(MakeRun(1, 4), -1, MachineWith({}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->node_rank, 0);
  EXPECT_TRUE(c->standalone);
  EXPECT_EQ(c->run_id, "sft");
}

TEST(ClusterTest, SeveralNodesNeedARankAndAnEndpoint) {
  auto none = ResolveCluster(MakeRun(2, 2), -1, MachineWith({}));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("--node-rank"), std::string::npos);
  auto no_endpoint = ResolveCluster(MakeRun(2, 2), 1, MachineWith({}));
  ASSERT_FALSE(no_endpoint.ok());
  EXPECT_NE(no_endpoint.status().message().find("rendezvous endpoint"), std::string::npos);
  auto from_hosts = ResolveCluster(MakeRun(2, 2, {"a", "b"}), 1, MachineWith({}));
  ASSERT_TRUE(from_hosts.ok());
  EXPECT_EQ(from_hosts->rdzv_endpoint, "a:29500");
  auto from_env = ResolveCluster(
      MakeRun(2, 2), 1,
      MachineWith({{"EVENKEEL_RDZV_ENDPOINT", "127.0.0.1:1234"}, {"EVENKEEL_RUN_ID", "x y"}}));
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->rdzv_endpoint, "127.0.0.1:1234");
  EXPECT_EQ(from_env->run_id, "x_y");
  auto out_of_range = ResolveCluster(MakeRun(2, 2, {"a", "b"}), 2, MachineWith({}));
  EXPECT_FALSE(out_of_range.ok());
}

TEST(ClusterTest, SlurmGivesTheNodeAndIsCheckedAgainstTheRunFile) {
  std::map<std::string, std::string> slurm = {{"SLURM_JOB_ID", "77"},
                                              {"SLURM_NODEID", "1"},
                                              {"SLURM_NNODES", "2"},
                                              {"SLURM_JOB_NODELIST", "n[1-2]"}};
  auto c = ResolveCluster(MakeRun(2, 2), -1, MachineWith(slurm, {"n1", "n2"}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->node_rank, 1);
  EXPECT_EQ(c->rdzv_endpoint, "n1:29500");
  EXPECT_EQ(c->run_id, "slurm-77");
  EXPECT_EQ(c->source, "SLURM job 77");
  auto nodes = ResolveCluster(MakeRun(3, 2), -1, MachineWith(slurm, {"n1", "n2"}));
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(
      nodes.status().message().find("SLURM_NNODES=2 but /runs/run.toml has cluster.nodes = 3"),
      std::string::npos);
  auto hosts = ResolveCluster(MakeRun(2, 2, {"x", "y"}), -1, MachineWith(slurm, {"n1", "n2"}));
  ASSERT_FALSE(hosts.ok());
  EXPECT_NE(hosts.status().message().find("cluster.hosts"), std::string::npos);
  auto flag = ResolveCluster(MakeRun(2, 2), 0, MachineWith(slurm, {"n1", "n2"}));
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("contradicts SLURM_NODEID=1"), std::string::npos);
}

}  // namespace
}  // namespace ek::launch
