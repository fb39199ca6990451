// The rank layout of a run: nodes x GPUs per node, computed here and nowhere
// else. Global rank = node rank x gpus_per_node + local rank, which is what
// torchrun assigns (node_rank x nproc_per_node + local_rank) and what SLURM's
// SLURM_NODEID gives as the node rank. Hosts, when named, are listed in node
// rank order.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ek::run {

// Immutable after construction; cheap to copy; thread-safe for reads.
class Topology {
 public:
  Topology() = default;
  // `hosts` may be empty (then nodes are named "node-N") or hold one name per node.
  Topology(int nodes, int gpus_per_node, std::vector<std::string> hosts = {});
  // A layout discovered from the hosts themselves (telemetry without a run file).
  static Topology FromHosts(std::vector<std::string> hosts, int gpus_per_node);

  int nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int world() const { return nodes_ * gpus_per_node_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  bool has_hosts() const { return !hosts_.empty(); }

  // Ranks [first, last) of a node; empty when the node is out of range.
  int FirstRank(int node) const;
  int EndRank(int node) const;
  std::vector<int> RanksOf(int node) const;
  // -1 when out of range.
  int NodeOf(int rank) const;
  int LocalRank(int rank) const;
  // The node's host name, or "node-N" when hosts are not named.
  std::string HostOf(int node) const;
  // -1 when the host is not named in the layout.
  int NodeOfHost(std::string_view host) const;
  // Global rank of GPU `gpu` on `host`; -1 when the host is unknown or the index out of range.
  int Rank(std::string_view host, int gpu) const;
  // "node-b:3" (host and local rank) for a global rank; "rank N" when out of range.
  std::string RankName(int rank) const;

 private:
  int nodes_ = 0;
  int gpus_per_node_ = 0;
  std::vector<std::string> hosts_;
  std::unordered_map<std::string, int> index_;
};

}  // namespace ek::run
