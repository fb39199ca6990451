// Where this launcher stands in the run: its node rank, the rendezvous
// endpoint and id, the hosts, from (in order) the command line, the run file,
// evenkeel's environment variables and SLURM's. Everything is checked against
// the run file's topology; a contradiction is an error naming both sides.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "run/run_file.h"

namespace ek::launch {

// SLURM's host-list expansion ("node[01-02]" -> node01, node02), the seam a
// test replaces; the default runs `scontrol show hostnames LIST`.
using NodelistExpander =
    std::function<Result<std::vector<std::string>>(const std::string& nodelist)>;
Result<std::vector<std::string>> ScontrolHostnames(const std::string& nodelist);

struct Cluster {
  int node_rank = 0;
  int nodes = 1;
  int nproc_per_node = 1;
  std::vector<std::string> hosts;  // node-rank order; empty when unknown
  std::string rdzv_endpoint;       // HOST:PORT; "" with standalone
  bool standalone = false;         // one node: torchrun --standalone picks a free port
  std::string run_id;
  std::string slurm_job_id;  // "" outside SLURM
  std::string source;        // "command line", "SLURM job 1234", "single node"
};

// `node_rank_flag` is --node-rank, -1 when not given. The environment
// variables come from `env` (core/env.h); `expand` is ScontrolHostnames when
// empty.
Result<Cluster> ResolveCluster(const run::RunFile& run, int node_rank_flag, Env* env,
                               const NodelistExpander& expand = {});

}  // namespace ek::launch
