#include "launch/cluster.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/jsonl.h"
#include "core/process.h"

namespace ek::launch {

namespace {

Result<int> ParseCount(const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || errno || *end || n < 0 || n > std::numeric_limits<int>::max()) {
    return InvalidArgumentError(fmt::format("{}={} is not a non-negative integer", name, v));
  }
  return static_cast<int>(n);
}

}  // namespace

Result<std::vector<std::string>> ScontrolHostnames(const std::string& nodelist) {
  std::string exe = FindExecutable("scontrol");
  if (exe.empty())
    return NotFoundError("scontrol not found on PATH (needed to expand SLURM_JOB_NODELIST)");
  SpawnOptions o;
  o.argv = {exe, "show", "hostnames", nodelist};
  o.output_pipe = true;
  o.new_process_group = false;
  EK_ASSIGN_OR_RETURN(Child c, Child::Spawn(o));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(c.output_fd(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ExitStatus st = c.Wait();
  if (!st.ok())
    return IoError(fmt::format("scontrol show hostnames {}: {}: {}", nodelist, st.ToString(), out));
  std::vector<std::string> hosts;
  LineSplitter lines(out);
  for (TextLine line; lines.Next(&line);) {
    if (!line.text.empty()) hosts.emplace_back(line.text);
  }
  return hosts;
}

Result<Cluster> ResolveCluster(const run::RunFile& run, int node_rank_flag, Env* env,
                               const NodelistExpander& expand) {
  Cluster c;
  c.nodes = run.nodes;
  c.nproc_per_node = run.gpus_per_node;
  c.hosts = run.hosts;
  const std::string file = run.path.empty() ? "run file" : run.path;
  auto get = [&](const char* k) { return env->GetVar(k).value_or(""); };

  // SLURM: one launcher per node under srun.
  std::string job = get("SLURM_JOB_ID");
  std::string slurm_node = get("SLURM_NODEID");
  if (!job.empty() && !slurm_node.empty()) {
    c.slurm_job_id = job;
    EK_ASSIGN_OR_RETURN(int node, ParseCount("SLURM_NODEID", slurm_node));
    EK_ASSIGN_OR_RETURN(int nnodes, ParseCount("SLURM_NNODES", get("SLURM_NNODES")));
    if (nnodes != run.nodes) {
      return InvalidArgumentError(
          fmt::format("SLURM_NNODES={} but {} has cluster.nodes = {}", nnodes, file, run.nodes));
    }
    if (node_rank_flag >= 0 && node_rank_flag != node) {
      return InvalidArgumentError(
          fmt::format("--node-rank {} contradicts SLURM_NODEID={}", node_rank_flag, node));
    }
    c.node_rank = node;
    std::string nodelist = get("SLURM_JOB_NODELIST");
    if (nodelist.empty()) nodelist = get("SLURM_NODELIST");
    if (nodelist.empty()) return InvalidArgumentError("SLURM_JOB_NODELIST is not set");
    EK_ASSIGN_OR_RETURN(std::vector<std::string> hosts,
                        expand ? expand(nodelist) : ScontrolHostnames(nodelist));
    if (static_cast<int>(hosts.size()) != run.nodes) {
      return InvalidArgumentError(
          fmt::format("SLURM_JOB_NODELIST={} expands to {} host(s) ({}), {} has cluster.nodes = {}",
                      nodelist, hosts.size(), fmt::join(hosts, ","), file, run.nodes));
    }
    if (!run.hosts.empty() && run.hosts != hosts) {
      return InvalidArgumentError(fmt::format("SLURM gave hosts {} but {} lists cluster.hosts {}",
                                              fmt::join(hosts, ","), file,
                                              fmt::join(run.hosts, ",")));
    }
    c.hosts = hosts;
    c.source = "SLURM job " + job;
  } else if (node_rank_flag >= 0) {
    c.node_rank = node_rank_flag;
    c.source = "command line";
  } else if (run.nodes == 1) {
    c.node_rank = 0;
    c.source = "single node";
  } else {
    return InvalidArgumentError(
        fmt::format("{} has {} nodes: give --node-rank (0-{}) on each, or run under srun", file,
                    run.nodes, run.nodes - 1));
  }
  if (c.node_rank >= run.nodes) {
    return InvalidArgumentError(
        fmt::format("node rank {} but {} has cluster.nodes = {}", c.node_rank, file, run.nodes));
  }

  // Rendezvous endpoint: the run file, the environment, the first host, or standalone.
  std::string env_endpoint = get("EVENKEEL_RDZV_ENDPOINT");
  if (!run.rdzv_endpoint.empty() && !env_endpoint.empty() && run.rdzv_endpoint != env_endpoint) {
    return InvalidArgumentError(
        fmt::format("EVENKEEL_RDZV_ENDPOINT={} contradicts launch.rdzv_endpoint = '{}' in {}",
                    env_endpoint, run.rdzv_endpoint, file));
  }
  if (!run.rdzv_endpoint.empty()) {
    c.rdzv_endpoint = run.rdzv_endpoint;
  } else if (!env_endpoint.empty()) {
    c.rdzv_endpoint = env_endpoint;
  } else if (!c.hosts.empty() && run.nodes > 1) {
    c.rdzv_endpoint = fmt::format("{}:{}", c.hosts[0], run.rdzv_port);
  } else if (run.nodes == 1) {
    c.standalone = true;
  } else {
    return InvalidArgumentError(
        fmt::format("{} nodes and no rendezvous endpoint: set launch.rdzv_endpoint, "
                    "EVENKEEL_RDZV_ENDPOINT or cluster.hosts",
                    run.nodes));
  }

  // Run id: the run file, the environment, the SLURM job, the run's name.
  std::string env_id = get("EVENKEEL_RUN_ID");
  if (!run.run_id.empty() && !env_id.empty() && run.run_id != env_id) {
    return InvalidArgumentError(fmt::format(
        "EVENKEEL_RUN_ID={} contradicts launch.run_id = '{}' in {}", env_id, run.run_id, file));
  }
  c.run_id = !run.run_id.empty() ? run.run_id
             : !env_id.empty()   ? env_id
             : !job.empty()      ? "slurm-" + job
                                 : run.name;
  for (char& ch : c.run_id) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
      ch = '_';
  }
  return c;
}

}  // namespace ek::launch
