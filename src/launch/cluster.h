// Where this launcher stands in the run: its node rank, the rendezvous
// endpoint and id, the hosts, from (in order) the command line, the run file,
// evenkeel's environment variables and SLURM's. Everything is checked against
// the run file's topology; a contradiction is an error naming both sides.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "run/run_file.h"

namespace ek::launch {

// The seams a test replaces: environment variables, and SLURM's host-list
// expansion (`scontrol show hostnames LIST`).
struct ClusterEnv {
  std::function<std::optional<std::string>(const std::string&)> getenv;
  std::function<Result<std::vector<std::string>>(const std::string& nodelist)> expand_nodelist;
};
ClusterEnv RealClusterEnv();

struct Cluster {
  int node_rank = 0;
  int nodes = 1;
  int nproc_per_node = 1;
  std::vector<std::string> hosts;  // node-rank order; empty when unknown
  std::string rdzv_endpoint;       // HOST:PORT; "" with standalone
  bool standalone = false;         // one node: torchrun --standalone picks a free port
  std::string run_id;
  std::string slurm_job_id;        // "" outside SLURM
  std::string source;              // "command line", "SLURM job 1234", "single node"
};

// `node_rank_flag` is --node-rank, -1 when not given.
Result<Cluster> ResolveCluster(const run::RunFile& run, int node_rank_flag, const ClusterEnv& env);

}  // namespace ek::launch
