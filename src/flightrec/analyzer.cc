// One file over 600 lines: one cross-rank matcher whose passes share its per-rank state.
#include "flightrec/analyzer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

namespace ek::flightrec {

std::string_view FindingKindName(FindingKind kind) {
  switch (kind) {
    case FindingKind::kErrors:
      return "errors";
    case FindingKind::kMissingRanks:
      return "missing_ranks";
    case FindingKind::kAllToAllNumel:
      return "all_to_all_numel";
    case FindingKind::kMissingDumps:
      return "missing_dumps";
    case FindingKind::kNoErrors:
      return "no_errors";
    case FindingKind::kP2pMismatch:
      return "p2p_mismatch";
  }
  return "?";
}

namespace {

int64_t SaturateInt64(__int128 v) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(),
                    kMin = std::numeric_limits<int64_t>::min();
  return v > kMax ? kMax : v < kMin ? kMin : static_cast<int64_t>(v);
}

constexpr uint32_t kNoGroup = 0xffffffffu;
constexpr size_t kSelfCheckNotes =
    3;  // notes about fr_trace's per-rank rules; the rest are counted

// One rank's remaining entries (fr_trace's all_entries[rank]) with an index
// from (group, collective_seq_id) to positions, so that "the first remaining
// entry of this PG with this sequence id" is a binary search, not a scan.
struct RankState {
  int64_t rank = -1;
  const Dump* dump = nullptr;
  size_t begin = 0;             // entries before this were dropped by alignment
  std::vector<uint32_t> group;  // per entry
  std::vector<uint8_t> alive;
  std::vector<const OpName*> name;  // per entry
  size_t head = 0;                  // first alive index
  size_t remaining = 0;
  struct Key {
    uint32_t group;
    int64_t seq;
    uint32_t index;
    bool operator<(const Key& o) const {
      return group != o.group ? group < o.group : seq != o.seq ? seq < o.seq : index < o.index;
    }
  };
  std::vector<Key> keys;
  // What Find and the matcher's fast path read, packed so a slot touches one
  // cache line per rank: group, global desc, global signature, sequence id.
  struct Slim {
    uint32_t group;
    Sym desc;
    uint32_t sig;
    int64_t seq;
  };
  std::vector<Slim> slim;
  std::vector<Sym> gsym;       // this dump's symbols -> global symbols
  std::vector<uint32_t> gsig;  // this dump's signatures -> global signatures

  const Entry& entry(size_t i) const { return dump->entries[i]; }
  Sym Desc(size_t i) const { return slim[i].desc; }
  // Equal global signatures mean equal matcher-visible content.
  uint32_t Sig(size_t i) const { return slim[i].sig; }
  void Remove(size_t i) {
    if (!alive[i]) return;
    alive[i] = 0;
    --remaining;
    while (head < alive.size() && !alive[head]) ++head;
  }
  size_t NextAlive(size_t i) const {
    while (i < alive.size() && !alive[i]) ++i;
    return i;
  }
  // The entry of `g` with the highest sequence id (alive or not), or size().
  size_t LastOf(uint32_t g) const {
    auto it = std::upper_bound(
        keys.begin(), keys.end(),
        Key{g, std::numeric_limits<int64_t>::max(), std::numeric_limits<uint32_t>::max()});
    if (it == keys.begin() || std::prev(it)->group != g) return alive.size();
    return std::prev(it)->index;
  }
  // First alive entry of `g` with collective_seq_id `seq` and description
  // `desc` (a global symbol). Ranks in step have it at their head.
  size_t Find(uint32_t g, int64_t seq, Sym desc) const {
    if (head < alive.size() && slim[head].group == g && slim[head].seq == seq &&
        slim[head].desc == desc)
      return head;
    auto it = std::lower_bound(keys.begin(), keys.end(), Key{g, seq, 0});
    for (; it != keys.end() && it->group == g && it->seq == seq; ++it) {
      if (alive[it->index] && Desc(it->index) == desc) return it->index;
    }
    return alive.size();
  }
};

class Matcher {
 public:
  Matcher(const std::vector<Dump>& dumps, const AnalyzeOptions& options, Analysis* out)
      : dumps_(dumps), options_(options), out_(out) {}
  void Run();

 private:
  uint32_t GroupFor(const Dump& d, std::string_view pg_name);
  uint32_t AddGroup(std::string name, std::string desc, std::vector<int64_t> ranks);
  void BuildGroups();
  void BuildRanks();
  void Align();
  bool MatchOne(RankState& first);
  bool MatchCoalesced(RankState& first, const std::vector<size_t>& group0);
  std::vector<size_t> FindCoalescedGroup(const RankState& rs, uint32_t g) const;
  void Majority(Finding* f, int64_t pg_size);
  void Record(Finding f);
  RankState* StateOf(int64_t rank) {
    if (rank < 0 || static_cast<size_t>(rank) >= rank_index_.size() || rank_index_[rank] < 0)
      return nullptr;
    return &ranks_[rank_index_[rank]];
  }
  SlotEntry Slot(RankState& rs, size_t i) { return {rs.rank, rs.dump, &rs.entry(i), rs.name[i]}; }
  OpView View(const SlotEntry& s) { return MakeOpView(*s.dump, *s.entry, s.name); }
  // Where `rank` (which has a dump) last issued a collective of group `g`.
  StoppedRank StoppedAt(int64_t rank, uint32_t g) {
    StoppedRank st;
    st.rank = rank;
    RankState* rs = StateOf(rank);
    if (size_t i = rs->LastOf(g); i < rs->alive.size()) {
      st.last_seq = rs->entry(i).collective_seq_id;
      st.last = Slot(*rs, i);
    }
    return st;
  }

  const std::vector<Dump>& dumps_;
  const AnalyzeOptions& options_;
  Analysis* out_;
  std::map<std::pair<std::string, std::vector<int64_t>>, uint32_t> group_index_;
  std::map<std::pair<std::string, int64_t>, uint32_t> pg_of_;  // (pg name, rank) -> group
  std::vector<int> mismatch_;
  std::vector<RankState> ranks_;
  std::vector<int32_t> rank_index_;  // rank -> index into ranks_, -1 = no dump
  std::vector<size_t> order_;        // dumps_ indices by ascending rank
  std::unordered_map<std::string, Sym> global_syms_;
  std::map<std::array<Sym, 7>, uint32_t> global_sigs_;
  std::vector<std::pair<RankState*, size_t>> hits_;
  std::vector<uint8_t> self_checked_;  // per global signature: its per-rank rules were checked
  size_t self_check_notes_ = 0;        // entry kinds fr_trace's per-rank rules reject
  std::vector<std::optional<Finding>>
      undecided_;  // per group: its last slot the dumps present agree on
  std::set<int64_t> dump_ranks_;
};

uint32_t Matcher::AddGroup(std::string name, std::string desc, std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  auto key = std::make_pair(name, ranks);
  auto it = group_index_.find(key);
  if (it != group_index_.end()) {
    const Group& g = out_->groups[it->second];
    if (g.desc != desc) {
      out_->notes.push_back(fmt::format("pg {} is described as '{}' and as '{}' by different ranks",
                                        name, g.desc, desc));
    }
    return it->second;
  }
  uint32_t id = static_cast<uint32_t>(out_->groups.size());
  out_->groups.push_back({std::move(name), std::move(desc), std::move(ranks)});
  mismatch_.push_back(0);
  group_index_.emplace(std::move(key), id);
  return id;
}

void Matcher::BuildGroups() {
  std::set<int64_t> members;
  for (size_t k : order_) {
    const Dump& d = dumps_[k];
    for (const PgConfig& pg : d.pg_configs) {
      uint32_t g = AddGroup(pg.name, pg.desc, pg.ranks);
      pg_of_[{pg.name, d.rank}] = g;
      members.insert(pg.ranks.begin(), pg.ranks.end());
    }
  }
  out_->member_ranks.assign(members.begin(), members.end());
  for (int64_t r : members) {
    if (!dump_ranks_.count(r)) out_->missing_dump_ranks.push_back(r);
  }
}

uint32_t Matcher::GroupFor(const Dump& d, std::string_view pg_name) {
  auto it = pg_of_.find({std::string(pg_name), d.rank});
  if (it != pg_of_.end()) return it->second;
  // Not in this rank's pg_config. gloo's recorder registers its PG with an
  // empty name and desc; use that rank list, else the world.
  std::vector<int64_t> ranks;
  std::string why;
  if (const PgConfig* unnamed = d.FindPg("")) {
    ranks = unnamed->ranks;
    why = "the rank list of its unnamed pg_config entry";
  } else {
    ranks = d.WorldRanks();
    if (ranks.empty()) ranks.assign(dump_ranks_.begin(), dump_ranks_.end());
    why = "the world";
  }
  std::string desc;
  for (const Entry& e : d.entries) {
    if (d.sym(e.pg_name) == pg_name) {
      desc = d.sym(e.pg_desc);
      break;
    }
  }
  uint32_t g = AddGroup(std::string(pg_name), desc, ranks);
  pg_of_[{std::string(pg_name), d.rank}] = g;
  std::string note = fmt::format(
      "pg {} is not in the pg_config of some dumps (rank {} first); its members are taken from {}",
      pg_name, d.rank, why);
  if (std::find(out_->notes.begin(), out_->notes.end(), note) == out_->notes.end() &&
      std::none_of(out_->notes.begin(), out_->notes.end(), [&](const std::string& n) {
        return n.rfind(fmt::format("pg {} is not in the pg_config", pg_name), 0) == 0;
      })) {
    out_->notes.push_back(note);
  }
  for (int64_t r : ranks) {
    if (!dump_ranks_.count(r) &&
        std::find(out_->missing_dump_ranks.begin(), out_->missing_dump_ranks.end(), r) ==
            out_->missing_dump_ranks.end()) {
      out_->missing_dump_ranks.push_back(r);
      std::sort(out_->missing_dump_ranks.begin(), out_->missing_dump_ranks.end());
    }
  }
  return g;
}

// Runs fn(i) for i in [0, n) on up to hardware_concurrency threads.
template <typename Fn>
void ParallelFor(size_t n, Fn fn) {
  size_t threads =
      std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::max<size_t>(n, 1));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

void Matcher::BuildRanks() {
  ranks_.resize(dumps_.size());
  // Serial: everything that touches shared tables (global symbols, groups,
  // op names), once per distinct value of a dump.
  std::vector<std::vector<const OpName*>> name_of(dumps_.size());
  std::vector<std::vector<uint32_t>> group_of(dumps_.size());
  for (size_t i = 0; i < dumps_.size(); ++i) {
    const Dump& d = dumps_[order_[i]];
    RankState& rs = ranks_[i];
    rs.rank = d.rank;
    rs.dump = &d;
    if (d.rank >= 0) {
      if (static_cast<size_t>(d.rank) >= rank_index_.size()) rank_index_.resize(d.rank + 1, -1);
      rank_index_[d.rank] = static_cast<int32_t>(i);
    }
    for (const std::string& str : d.symbols) {
      rs.gsym.push_back(
          global_syms_.emplace(str, static_cast<Sym>(global_syms_.size())).first->second);
    }
    for (const auto& sig : d.signatures) {
      std::array<Sym, 7> g;
      for (size_t k = 0; k < g.size(); ++k) g[k] = rs.gsym[sig[k]];
      rs.gsig.push_back(
          global_sigs_.emplace(g, static_cast<uint32_t>(global_sigs_.size())).first->second);
    }
    name_of[i].assign(d.symbols.size(), nullptr);
    for (const auto& sig : d.signatures) {
      if (!name_of[i][sig[0]]) {
        out_->op_names.push_back(std::make_unique<OpName>(ParseOpName(d.sym(sig[0]))));
        name_of[i][sig[0]] = out_->op_names.back().get();
      }
    }
    group_of[i].assign(d.symbols.size(), kNoGroup);
    for (const Entry& e : d.entries) {
      if (group_of[i][e.pg_name] == kNoGroup)
        group_of[i][e.pg_name] = GroupFor(d, d.sym(e.pg_name));
    }
  }
  // Parallel: the per-entry arrays.
  ParallelFor(dumps_.size(), [&](size_t i) {
    RankState& rs = ranks_[i];
    const Dump& d = *rs.dump;
    size_t n = d.entries.size();
    rs.group.resize(n);
    rs.alive.assign(n, 1);
    rs.name.resize(n);
    rs.slim.resize(n);
    for (size_t j = 0; j < n; ++j) {
      const Entry& e = d.entries[j];
      rs.name[j] = name_of[i][e.profiling_name];
      rs.group[j] = group_of[i][e.pg_name];
      rs.slim[j] = {rs.group[j], rs.gsym[e.pg_desc], rs.gsig[e.signature], e.collective_seq_id};
    }
  });
}

// align_trace_from_beginning: drop entries older than the newest first
// record_id of any rank (their partners may have left the other rings).
void Matcher::Align() {
  int64_t start = 0;
  for (const RankState& rs : ranks_) {
    if (!rs.dump->entries.empty()) start = std::max(start, rs.dump->entries.front().record_id);
  }
  std::atomic<size_t> dropped{0};
  ParallelFor(ranks_.size(), [&](size_t r) {
    RankState& rs = ranks_[r];
    size_t n = 0;
    for (size_t j = 0; j < rs.alive.size(); ++j) {
      if (rs.entry(j).record_id < start) {
        rs.alive[j] = 0;
        ++n;
      }
    }
    dropped += n;
    rs.remaining = rs.alive.size() - n;
    rs.head = rs.NextAlive(0);
    rs.keys.reserve(rs.remaining);
    for (size_t j = 0; j < rs.alive.size(); ++j) {
      if (rs.alive[j]) rs.keys.push_back({rs.group[j], rs.slim[j].seq, static_cast<uint32_t>(j)});
    }
    if (!std::is_sorted(rs.keys.begin(), rs.keys.end())) std::sort(rs.keys.begin(), rs.keys.end());
  });
  if (dropped) {
    out_->notes.push_back(fmt::format(
        "{} entries older than record_id {} were set aside (not in every rank's ring buffer)",
        dropped, start));
  }
}

std::vector<size_t> Matcher::FindCoalescedGroup(const RankState& rs, uint32_t g) const {
  std::vector<size_t> found;
  int64_t key = 0;
  for (size_t i = rs.head; i < rs.alive.size(); i = rs.NextAlive(i + 1)) {
    if (rs.group[i] != g) continue;
    const Entry& e = rs.entry(i);
    if (found.empty()) {
      key = e.is_p2p ? e.p2p_seq_id : e.collective_seq_id;
      found.push_back(i);
    } else if ((!e.is_p2p && e.collective_seq_id == key) || (e.is_p2p && e.p2p_seq_id == key)) {
      found.push_back(i);
    } else {
      break;
    }
  }
  if (found.size() < 2) found.clear();
  return found;
}

void Matcher::Record(Finding f) {
  if (out_->findings.size() >= options_.max_findings) {
    ++out_->findings_dropped;
    return;
  }
  out_->findings.push_back(std::move(f));
}

// The deterministic reference: the entry most present ranks agree with, ties
// to the lowest rank. Only called when fr_trace's reference (the lowest
// rank's entry) found errors.
void Matcher::Majority(Finding* f, int64_t pg_size) {
  if (f->entries.size() < 3) return;  // two ranks: a tie, the lowest rank stays the reference
  size_t best = 0, best_count = 0;
  for (size_t i = 0; i < f->entries.size(); ++i) {
    OpView ref = View(f->entries[i]);
    size_t count = 0;
    for (const SlotEntry& s : f->entries) count += Match(ref, View(s), pg_size).ok() ? 1 : 0;
    if (count > best_count) best = i, best_count = count;  // strict: ties keep the lower rank
  }
  if (best == 0) return;
  std::vector<Culprit> culprits;
  OpView ref = View(f->entries[best]);
  for (const SlotEntry& s : f->entries) {
    if (s.rank == f->entries[best].rank) continue;
    MatchInfo info = Match(ref, View(s), pg_size);
    if (!info.ok()) culprits.push_back({s.rank, std::move(info)});
  }
  if (culprits.empty()) return;
  for (const Culprit& c : f->culprits) f->fr_trace_culprits.push_back(c.rank);
  f->culprits = std::move(culprits);
  f->reference_rank = f->entries[best].rank;
  f->record_id = f->entries[best].entry->record_id;
}

// build_collectives' normal path for the head entry of `first`: returns false
// when the mismatch cap stops the analysis.
bool Matcher::MatchOne(RankState& first) {
  size_t head = first.head;
  const Entry& cur = first.entry(head);
  uint32_t g = first.group[head];
  const Group& group = out_->groups[g];
  std::vector<size_t> coalesced = FindCoalescedGroup(first, g);
  if (!coalesced.empty()) return MatchCoalesced(first, coalesced);

  std::string_view desc = first.dump->sym(cur.pg_desc);
  Sym gdesc = first.Desc(head);
  uint32_t ref_sig = first.Sig(head);
  int64_t pg_size = static_cast<int64_t>(group.ranks.size());
  SlotEntry ref = Slot(first, head);
  OpView ref_view = View(ref);
  // Entries with the reference's content match as the reference matches
  // itself: computed once per slot instead of once per rank.
  MatchInfo self_match = Match(ref_view, ref_view, pg_size);
  if (ref_sig < self_checked_.size() && !self_checked_[ref_sig]) {
    self_checked_[ref_sig] = 1;
    // fr_trace's per-rank rules: the same verdict on every rank with this entry.
    MatchInfo own = SelfCheck(ref_view, pg_size);
    if (!own.ok() && ++self_check_notes_ <= kSelfCheckNotes) {
      out_->notes.push_back(fmt::format(
          "pg {} seq {} {} (first of its kind): fr_trace reports {} for it on every rank alike; it "
          "compares one rank's "
          "input with its own output (how the backend records this op), not ranks with each other, "
          "so evenkeel does "
          "not count it as a mismatch",
          group.name, cur.collective_seq_id, first.dump->sym(cur.profiling_name), own.ToString()));
    }
  }
  Finding f;
  f.pg_name = group.name;
  f.pg_desc = std::string(desc);
  f.collective_seq_id = cur.collective_seq_id;
  f.p2p_seq_id = cur.p2p_seq_id;
  f.record_id = cur.record_id;
  f.expected_ranks = group.ranks;
  f.reference_rank = f.fr_trace_reference_rank = first.rank;
  f.entries.push_back(ref);
  bool poisoned = mismatch_[g] > 0;
  bool found_all = true, undecided = false;
  std::vector<std::pair<RankState*, size_t>>& hits = hits_;
  hits.assign(1, {&first, head});
  for (int64_t o : group.ranks) {
    if (o == first.rank) continue;
    RankState* rs = StateOf(o);
    if (!rs) {
      f.missing_dump_ranks.push_back(o);
      found_all = false;
      continue;
    }
    size_t i = rs->Find(g, cur.collective_seq_id, gdesc);
    if (i == rs->alive.size()) {
      f.missing_ranks.push_back(o);
      found_all = false;
      continue;
    }
    hits.push_back({rs, i});
    SlotEntry s = Slot(*rs, i);
    f.entries.push_back(s);
    if (rs->Sig(i) == ref_sig && self_match.ok()) {
      if (self_match.state == MatchState::kUndecided) undecided = true;
      if (poisoned) found_all = false;
      continue;
    }
    MatchInfo info = rs->Sig(i) == ref_sig ? self_match : Match(ref_view, View(s), pg_size);
    if (info.state == MatchState::kUndecided) undecided = true;
    if (!info.ok())
      f.culprits.push_back({o, std::move(info)});
    else if (poisoned)
      found_all = false;  // candidate, not found: fr_trace stops pairing after a mismatch
  }
  bool ok = false;
  // error_analysis, branches in fr_trace's order.
  if (!f.missing_ranks.empty()) {
    f.kind = FindingKind::kMissingRanks;
    ++mismatch_[g];
    for (int64_t o : f.missing_ranks) f.stopped.push_back(StoppedAt(o, g));
  } else if (f.culprits.empty() && !poisoned && f.missing_dump_ranks.empty()) {
    ok = true;
    if (undecided && (first.dump->major > 2 || (first.dump->major == 2 && first.dump->minor > 3))) {
      // Summed wide: each rank's count fits in 64 bits, their sum need not.
      __int128 in = 0, out = 0;
      for (const SlotEntry& s : f.entries) {
        in += s.entry->input_numel0;
        out += s.entry->output_numel0;
      }
      f.total_input_numel = SaturateInt64(in);
      f.total_output_numel = SaturateInt64(out);
      if (in != out) {
        ok = false;
        f.kind = FindingKind::kAllToAllNumel;
        f.culprits.push_back({first.rank, {MatchState::kSizeOrSyntaxMismatch, ""}});
        ++mismatch_[g];
      }
    }
  } else if (!f.culprits.empty()) {
    f.kind = FindingKind::kErrors;
    ++mismatch_[g];
    Majority(&f, pg_size);
  } else if (!f.missing_dump_ranks.empty()) {
    // The dumps present agree; only the absent ones could disagree. fr_trace
    // counts this as a mismatch, which poisons the PG from its first slot on
    // and hides a real desync further on: here it is no mismatch, and the
    // PG's last such slot (where the dumps present end) is one finding, added
    // at the end.
    f.kind = FindingKind::kMissingDumps;
    for (auto [rs, i] : hits) rs->Remove(i);
    if (!poisoned) {
      if (g >= undecided_.size()) undecided_.resize(g + 1);
      undecided_[g] = std::move(f);
    }
    return true;
  } else {
    f.kind = FindingKind::kNoErrors;
  }
  if (ok && found_all) {
    ++out_->collectives_matched;
  } else if (!ok || !found_all) {
    f.first_in_pg = !poisoned && f.kind != FindingKind::kNoErrors;
    if (f.kind == FindingKind::kMissingRanks && !f.culprits.empty()) Majority(&f, pg_size);
    Record(std::move(f));
  }
  for (auto [rs, i] : hits) rs->Remove(i);
  if (mismatch_[g] > options_.mismatch_cap) {
    out_->notes.push_back(
        fmt::format("stopped after {} mismatches in pg {} (fr_trace's --mismatch_cap {})",
                    mismatch_[g], group.name, options_.mismatch_cap));
    out_->stopped_at_cap = true;
    return false;
  }
  return true;
}

bool Matcher::MatchCoalesced(RankState& first, const std::vector<size_t>& group0) {
  uint32_t g = first.group[group0[0]];
  const Group& group = out_->groups[g];
  int64_t pg_size = static_cast<int64_t>(group.ranks.size());
  // Collect the group on every member (and P2P peers), ascending rank.
  std::map<int64_t, std::vector<size_t>> groups;
  std::set<int64_t> todo(group.ranks.begin(), group.ranks.end()), done;
  while (!todo.empty()) {
    int64_t r = *todo.begin();
    todo.erase(todo.begin());
    done.insert(r);
    RankState* rs = StateOf(r);
    std::vector<size_t> grp =
        rs ? (r == first.rank ? group0 : FindCoalescedGroup(*rs, g)) : std::vector<size_t>{};
    for (size_t i : grp) {
      const OpName* n = rs->name[i];
      int64_t peer = -1;
      if (n->op_class == OpClass::kSend && n->dst >= 0 && n->dst < pg_size)
        peer = group.ranks[n->dst];
      if (n->op_class == OpClass::kRecv && n->src >= 0 && n->src < pg_size)
        peer = group.ranks[n->src];
      if (peer >= 0 && !done.count(peer)) todo.insert(peer);
    }
    groups[r] = std::move(grp);
  }
  bool is_p2p = false;
  for (auto& [r, grp] : groups) {
    for (size_t i : grp) {
      auto c = StateOf(r)->name[i]->op_class;
      if (c == OpClass::kSend || c == OpClass::kRecv) is_p2p = true;
    }
  }
  const Entry& e0 = first.entry(group0[0]);
  Finding f;
  f.pg_name = group.name;
  f.pg_desc = first.dump->sym(e0.pg_desc);
  f.collective_seq_id = e0.collective_seq_id;
  f.p2p_seq_id = e0.p2p_seq_id;
  f.record_id = e0.record_id;
  f.expected_ranks = group.ranks;
  f.reference_rank = f.fr_trace_reference_rank = first.rank;
  bool poisoned = mismatch_[g] > 0;
  bool match = true;
  if (is_p2p) {
    // Pair sends with recvs greedily (match_coalesced_groups): each op must
    // find its partner on the peer; a same-direction op to the same peer
    // earlier in the peer's list stops the search (ordering rule).
    std::map<int64_t, std::vector<size_t>> ops;
    for (auto& [r, grp] : groups) {
      ops[r] = grp;
      if (!ops[r].empty() && StateOf(r)->name[ops[r].back()]->op_class == OpClass::kCoalescedMarker)
        ops[r].pop_back();
    }
    for (auto it = ops.begin(); it != ops.end() && match;) {
      if (it->second.empty()) {
        ++it;
        continue;
      }
      RankState* me = StateOf(it->first);
      size_t i = it->second.front();
      const OpName* op = me->name[i];
      int64_t peer_local = op->op_class == OpClass::kSend ? op->dst : op->src;
      int64_t peer = peer_local >= 0 && peer_local < pg_size ? group.ranks[peer_local] : -1;
      auto pit = ops.find(peer);
      SlotEntry mine = Slot(*me, i);
      f.entries.push_back(mine);
      bool paired = false;
      if (pit != ops.end() && op->op_class != OpClass::kCoalescedMarker &&
          op->op_class != OpClass::kCollective) {
        RankState* ps = StateOf(peer);
        for (size_t k = 0; k < pit->second.size(); ++k) {
          SlotEntry theirs = Slot(*ps, pit->second[k]);
          if (Match(View(mine), View(theirs), pg_size).state == MatchState::kFullyMatched) {
            pit->second.erase(pit->second.begin() + k);
            paired = true;
            break;
          }
          // Ordering rule: the first partner-kind op between the same pair must
          // be this op's partner (fr_trace's literal test, op.dst == other.src,
          // also stops at any send of the peer; see docs/fr.md).
          bool partner_kind = theirs.name->op_class ==
                              (op->op_class == OpClass::kSend ? OpClass::kRecv : OpClass::kSend);
          if (partner_kind && theirs.name->src == op->src && theirs.name->dst == op->dst) break;
        }
      }
      if (!paired) {
        match = false;
        f.kind = FindingKind::kP2pMismatch;
        f.culprits.push_back({it->first,
                              {MatchState::kSizeOrSyntaxMismatch,
                               fmt::format("'{}' has no matching op on rank {}",
                                           me->dump->sym(mine.entry->profiling_name), peer)}});
        break;
      }
      it->second.erase(it->second.begin());
    }
  } else {
    // Non-P2P coalesced group (>= 2.7): every op through the normal check.
    for (size_t k = 0; k < group0.size() && match; ++k) {
      Finding step = f;
      SlotEntry ref = Slot(first, group0[k]);
      step.entries = {ref};
      step.record_id = ref.entry->record_id;
      bool found_all = true;
      for (auto& [r, grp] : groups) {
        if (r == first.rank) continue;
        if (!StateOf(r)) {
          step.missing_dump_ranks.push_back(r);
          found_all = false;
          continue;
        }
        if (k >= grp.size()) {
          step.missing_ranks.push_back(r);
          found_all = false;
          continue;
        }
        SlotEntry s = Slot(*StateOf(r), grp[k]);
        step.entries.push_back(s);
        MatchInfo info = Match(View(ref), View(s), pg_size);
        if (!info.ok())
          step.culprits.push_back({r, std::move(info)});
        else if (poisoned)
          found_all = false;
      }
      for (int64_t r : step.missing_ranks) step.stopped.push_back(StoppedAt(r, g));
      if (!step.missing_ranks.empty())
        step.kind = FindingKind::kMissingRanks;
      else if (!step.culprits.empty())
        step.kind = FindingKind::kErrors;
      else if (!step.missing_dump_ranks.empty())
        step.kind = FindingKind::kMissingDumps;
      else if (!found_all)
        step.kind = FindingKind::kNoErrors;
      else
        continue;
      if (step.kind != FindingKind::kNoErrors) ++mismatch_[g];
      if (step.kind == FindingKind::kErrors) Majority(&step, pg_size);
      f = std::move(step);
      match = false;
    }
  }
  if (match && !poisoned) {
    ++out_->collectives_matched;
  } else {
    ++mismatch_[g];
    if (match) f.kind = FindingKind::kNoErrors;
    f.first_in_pg = !poisoned && f.kind != FindingKind::kNoErrors;
    Record(std::move(f));
  }
  // Clean-up as fr_trace: on every rank with a group, remove as many entries
  // as the first rank's group has, from that rank's first group entry on.
  for (auto& [r, grp] : groups) {
    if (grp.empty()) continue;
    RankState* rs = StateOf(r);
    size_t i = grp[0];
    for (size_t n = 0; n < group0.size() && i < rs->alive.size(); ++n, i = rs->NextAlive(i + 1))
      rs->Remove(i);
  }
  if (mismatch_[g] > options_.mismatch_cap) {
    out_->notes.push_back(
        fmt::format("stopped after {} mismatches in pg {} (fr_trace's --mismatch_cap {})",
                    mismatch_[g], group.name, options_.mismatch_cap));
    out_->stopped_at_cap = true;
    return false;
  }
  return true;
}

void Matcher::Run() {
  // Ascending rank, whatever order the caller passes: nothing depends on it.
  order_.resize(dumps_.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
  std::stable_sort(order_.begin(), order_.end(),
                   [&](size_t a, size_t b) { return dumps_[a].rank < dumps_[b].rank; });
  for (const Dump& d : dumps_) dump_ranks_.insert(d.rank);
  BuildGroups();
  BuildRanks();
  self_checked_.assign(global_sigs_.size(), 0);
  Align();
  std::set<std::string> versions;
  for (const Dump& d : dumps_) versions.insert(d.version);
  if (versions.size() > 1) {
    std::string list;
    for (const auto& v : versions) list += (list.empty() ? "" : ", ") + v;
    out_->notes.push_back(fmt::format(
        "dumps have different versions ({}); fr_trace refuses this, evenkeel reads each as written "
        "as written",
        list));
  }
  for (RankState& rs : ranks_) {
    while (rs.remaining > 0 && MatchOne(rs)) {
    }
    if (out_->stopped_at_cap) break;
  }
  // A PG's "cannot decide" finding is its headline only if nothing in it was decided.
  for (uint32_t g = 0; g < undecided_.size(); ++g) {
    if (!undecided_[g]) continue;
    Finding& f = *undecided_[g];
    f.first_in_pg = mismatch_[g] == 0;
    Record(std::move(f));
  }
  if (self_check_notes_ > kSelfCheckNotes) {
    out_->notes.push_back(
        fmt::format("{} more entry kinds that fr_trace's per-rank rules reject alike on every rank",
                    self_check_notes_ - kSelfCheckNotes));
  }
}

}  // namespace

bool RankStopped(const Finding& f) {
  if (f.kind != FindingKind::kMissingRanks || f.stopped.empty()) return false;
  return std::all_of(f.stopped.begin(), f.stopped.end(),
                     [&](const StoppedRank& s) { return s.last_seq < f.collective_seq_id; });
}

Analysis Analyze(const std::vector<Dump>& dumps, const AnalyzeOptions& options) {
  Analysis out;
  Matcher(dumps, options, &out).Run();
  return out;
}

}  // namespace ek::flightrec
