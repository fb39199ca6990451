// Cross-rank matching of flight-recorder entries per process group and
// collective sequence id, after fr_trace's build_collectives
// (torch/distributed/flight_recorder/components/builder.py @26a39059 and
// utils.py @67685796; match rules in op.h). Departures, all in docs/fr.md:
//  - ranks are visited in ascending order, never in directory-listing order;
//  - where a slot's ranks disagree, the reference entry is the one most ranks
//    share (ties: the lowest rank), not the first-listed rank's, so the
//    minority is named; Finding::fr_trace_reference_rank keeps fr_trace's
//    choice (lowest rank first) so the output can say where the two differ;
//  - a missing dump never aborts the analysis (fr_trace needs
//    --allow-incomplete-ranks); a PG absent from a rank's pg_config falls back
//    to the rank list of an unnamed PG (gloo's recorder writes one) or the world;
//  - a coalesced recv looks up its sender's ops (fr_trace looks up its own);
//  - entries are compared across ranks only (op.h's Match): fr_trace's
//    per-rank input-vs-output rules become a note, not a finding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flightrec/dump.h"
#include "flightrec/op.h"

namespace ek::flightrec {

enum class FindingKind : uint8_t {
  kErrors,         // "Collective sequence number: N has errors" (type/size/dtype/state)
  kMissingRanks,   // "Not all ranks joining collective, sequence number: N"
  kAllToAllNumel,  // "Input/output mismatch in the collective sequence number: N"
  kMissingDumps,   // "We cannot decide what's wrong ... missed FR dumps from ranks"
  kNoErrors,       // "No errors found for this collective entry" (only after an earlier mismatch)
  kP2pMismatch,    // a coalesced send/recv group whose ops do not pair up ("MISMATCH")
};

std::string_view FindingKindName(FindingKind kind);

// A rank's entry at a slot. Pointers into the Dumps given to Analyze.
struct SlotEntry {
  int64_t rank = -1;
  const Dump* dump = nullptr;
  const Entry* entry = nullptr;
  const OpName* name = nullptr;
};

struct Culprit {
  int64_t rank = -1;
  MatchInfo info;
};

// A rank that has no entry at a slot the others reached: where it stopped.
struct StoppedRank {
  int64_t rank = -1;
  int64_t last_seq = -1;  // its highest collective_seq_id in the PG, -1 if none
  SlotEntry last;         // that entry (entry == nullptr if none)
};

struct Finding {
  FindingKind kind = FindingKind::kErrors;
  bool first_in_pg =
      false;  // fr_trace's first mismatch for this PG; later ones are low-reliability
  std::string pg_name;
  std::string pg_desc;
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
  int64_t record_id = 0;
  std::vector<int64_t> expected_ranks;
  std::vector<int64_t> missing_ranks;       // members with a dump but no entry at this slot
  std::vector<int64_t> missing_dump_ranks;  // members without a (good) dump
  int64_t reference_rank = -1;
  int64_t fr_trace_reference_rank =
      -1;  // fr_trace's reference with ranks listed in ascending order
  std::vector<int64_t> fr_trace_culprits;  // whom fr_trace names (when the reference differs)
  std::vector<SlotEntry> entries;          // every present rank's entry at the slot, ascending rank
  std::vector<Culprit> culprits;           // ascending rank
  std::vector<StoppedRank> stopped;  // kMissingRanks: each missing rank's last entry in the PG
  int64_t total_input_numel = 0;     // kAllToAllNumel
  int64_t total_output_numel = 0;
};

struct Group {
  std::string name;
  std::string desc;
  std::vector<int64_t> ranks;  // sorted
};

struct AnalyzeOptions {
  int mismatch_cap = 10;       // fr_trace --mismatch_cap: stop after this many per PG
  size_t max_findings = 1000;  // findings kept; the rest are counted
};

struct Analysis {
  std::vector<Group> groups;
  std::vector<Finding> findings;
  size_t findings_dropped = 0;
  size_t collectives_matched =
      0;  // passing collectives (fr_trace's pass_check and all ranks found)
  std::vector<int64_t> member_ranks;        // every rank named in any pg_config
  std::vector<int64_t> missing_dump_ranks;  // members without a dump given to Analyze
  std::vector<std::string> notes;           // departures and data oddities worth a line
  bool stopped_at_cap = false;
  std::vector<std::unique_ptr<OpName>> op_names;  // owns SlotEntry::name
};

// A kMissingRanks finding whose missing ranks all stopped before the slot
// (their last entry in the PG has a lower sequence id): a rank exited or hangs
// outside a collective. That is not a desync: the ranks never disagreed.
bool RankStopped(const Finding& f);

// `dumps`: one per rank, in any order (they are visited by ascending rank).
// The result points into `dumps`, which must outlive it. Never fails: what cannot
// be matched becomes a Finding or a note.
Analysis Analyze(const std::vector<Dump>& dumps, const AnalyzeOptions& options = {});

}  // namespace ek::flightrec
