#include "topology/topology.h"

#include <fmt/format.h>

namespace ek::run {

Topology::Topology(int nodes, int gpus_per_node, std::vector<std::string> hosts)
    : nodes_(nodes < 0 ? 0 : nodes),
      gpus_per_node_(gpus_per_node < 0 ? 0 : gpus_per_node),
      hosts_(std::move(hosts)) {
  for (size_t i = 0; i < hosts_.size(); ++i) index_.emplace(hosts_[i], static_cast<int>(i));
}

Topology Topology::FromHosts(std::vector<std::string> hosts, int gpus_per_node) {
  int n = static_cast<int>(hosts.size());
  return Topology(n, gpus_per_node, std::move(hosts));
}

int Topology::FirstRank(int node) const {
  if (node < 0 || node >= nodes_) return 0;
  return node * gpus_per_node_;
}

int Topology::EndRank(int node) const {
  if (node < 0 || node >= nodes_) return 0;
  return (node + 1) * gpus_per_node_;
}

std::vector<int> Topology::RanksOf(int node) const {
  std::vector<int> out;
  for (int r = FirstRank(node); r < EndRank(node); ++r) out.push_back(r);
  return out;
}

int Topology::NodeOf(int rank) const {
  if (gpus_per_node_ <= 0 || rank < 0 || rank >= world()) return -1;
  return rank / gpus_per_node_;
}

int Topology::LocalRank(int rank) const {
  if (gpus_per_node_ <= 0 || rank < 0 || rank >= world()) return -1;
  return rank % gpus_per_node_;
}

std::string Topology::HostOf(int node) const {
  if (node >= 0 && node < static_cast<int>(hosts_.size())) return hosts_[node];
  return fmt::format("node-{}", node);
}

int Topology::NodeOfHost(std::string_view host) const {
  auto it = index_.find(std::string(host));
  return it == index_.end() ? -1 : it->second;
}

int Topology::Rank(std::string_view host, int gpu) const {
  if (gpu < 0 || gpu >= gpus_per_node_) return -1;
  int node = NodeOfHost(host);
  if (node < 0 || node >= nodes_) return -1;
  return node * gpus_per_node_ + gpu;
}

std::string Topology::RankName(int rank) const {
  int node = NodeOf(rank);
  if (node < 0) return fmt::format("rank {}", rank);
  return fmt::format("{}:{}", HostOf(node), LocalRank(rank));
}

}  // namespace ek::run
