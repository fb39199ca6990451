// One file over 600 lines: the text and JSON renderings of one analysis share helpers.
#include "flightrec/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/json_out.h"

namespace ek::flightrec {

namespace {

std::string Ranks(const std::vector<int64_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", CompactRanges(ranks));
}

std::string Compact(std::string_view repr) {
  std::string s;
  for (char c : repr) {
    if (c != ' ') s += c;
  }
  return s;
}

std::string PgLabel(const std::string& name, const std::string& desc) {
  if (desc.empty() || desc == "undefined") return "pg " + name;
  return fmt::format("pg {} ({})", name, desc);
}

// "reduce_scatter [[4,256]]->[[256]]", "all_reduce (barrier) [[1]]", "barrier".
std::string OpLabel(const SlotEntry& s) {
  std::string type = s.name->type;
  if (type == "all_reduce_barrier") type = "all_reduce (barrier)";
  if (s.name->op_class == OpClass::kSend || s.name->op_class == OpClass::kRecv) {
    type = s.dump->sym(s.entry->profiling_name)
               .substr(s.name->lib.empty() ? 0 : s.name->lib.size() + 1);
  }
  std::string in = Compact(s.dump->sym(s.entry->input_sizes));
  std::string out = Compact(s.dump->sym(s.entry->output_sizes));
  if (in == "[]" && out == "[]") return type;
  if (in == out) return type + " " + in;
  return type + " " + in + "->" + out;
}

std::string Suffix(const Finding& f) {
  switch (f.kind) {
    case FindingKind::kErrors: {
      MatchState s =
          f.culprits.empty() ? MatchState::kSizeOrSyntaxMismatch : f.culprits.front().info.state;
      switch (s) {
        case MatchState::kCollectiveTypeMismatch:
          return "different collectives at the same slot - conclusive";
        case MatchState::kSizeOrSyntaxMismatch:
          if (!f.entries.empty() && (f.entries.front().name->op_class == OpClass::kSend ||
                                     f.entries.front().name->op_class == OpClass::kRecv)) {
            return "send and recv do not pair up (peers or sizes differ) - conclusive";
          }
          return "same collective, different sizes - conclusive";
        case MatchState::kCollectiveDtypeMismatch:
          return "same collective, different dtypes - conclusive";
        case MatchState::kCollectiveStateMismatch:
          return "same collective in different states - inconclusive (a rank may only be slower)";
        default:
          return "mismatch";
      }
    }
    case FindingKind::kMissingRanks:
      if (RankStopped(f)) return "a rank stopped, not a desync - inconclusive";
      return "not all ranks joined the collective (a rank skipped a sequence id the others issued) "
             "- conclusive";
    case FindingKind::kAllToAllNumel:
      return fmt::format("all_to_all element counts differ (in {}, out {}) - conclusive",
                         f.total_input_numel, f.total_output_numel);
    case FindingKind::kMissingDumps:
      return "no mismatch among the dumps present - inconclusive";
    case FindingKind::kNoErrors:
      return "no mismatch found at this slot";
    case FindingKind::kP2pMismatch:
      return "send/recv ops do not pair up - conclusive";
  }
  return "";
}

// Ranks at the slot grouped by what they are in (with dtypes and states when
// those differ); the reference's group first.
std::vector<std::pair<std::string, std::vector<int64_t>>> SlotGroups(const Finding& f) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> groups;
  // Dtypes and states only when op and sizes are the same everywhere.
  bool dtypes_differ = false, states_differ = false, ops_differ = false;
  for (const SlotEntry& s : f.entries) ops_differ |= OpLabel(s) != OpLabel(f.entries.front());
  for (const SlotEntry& s : f.entries) {
    if (ops_differ) break;
    const SlotEntry& r = f.entries.front();
    auto d = [](const SlotEntry& x) {
      return x.dump->sym(x.entry->input_dtypes) + x.dump->sym(x.entry->output_dtypes);
    };
    dtypes_differ |= d(s) != d(r);
    states_differ |= s.dump->sym(s.entry->state) != r.dump->sym(r.entry->state);
  }
  for (const SlotEntry& s : f.entries) {
    std::string label = OpLabel(s);
    if (dtypes_differ) {
      label += fmt::format(" {}->{}", Compact(s.dump->sym(s.entry->input_dtypes)),
                           Compact(s.dump->sym(s.entry->output_dtypes)));
    }
    if (states_differ) label += fmt::format(" ({})", s.dump->sym(s.entry->state));
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == label; });
    if (it == groups.end())
      groups.push_back({label, {s.rank}});
    else
      it->second.push_back(s.rank);
  }
  std::stable_sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
    bool ra = std::count(a.second.begin(), a.second.end(), f.reference_rank) > 0;
    bool rb = std::count(b.second.begin(), b.second.end(), f.reference_rank) > 0;
    return ra > rb;
  });
  return groups;
}

std::vector<int64_t> CulpritRanks(const Finding& f) {
  std::vector<int64_t> r;
  for (const Culprit& c : f.culprits) r.push_back(c.rank);
  return r;
}

std::string DifferenceNote(const Finding& f) {
  if (f.reference_rank == f.fr_trace_reference_rank) return "";
  return fmt::format(
      "fr_trace takes the first-listed rank's entry as the reference; with rank {} listed first it "
      "names {} as culprit, "
      "evenkeel takes the entry most ranks share (rank {}'s) and names {}",
      f.fr_trace_reference_rank, Ranks(f.fr_trace_culprits), f.reference_rank,
      Ranks(CulpritRanks(f)));
}

struct RankLine {
  int64_t rank;
  std::string last_completed;
};

std::string LastCompleted(const Dump& d) {
  for (auto it = d.entries.rbegin(); it != d.entries.rend(); ++it) {
    if (d.sym(it->state) == "completed") {
      return fmt::format("{} seq {} {}", PgLabel(d.sym(it->pg_name), d.sym(it->pg_desc)),
                         it->collective_seq_id, d.sym(it->profiling_name));
    }
  }
  if (!d.pg_status.empty()) {
    std::string s;
    for (const PgStatus& st : d.pg_status) {
      s += fmt::format("{}pg uid {} seq {}", s.empty() ? "" : ", ", st.pg_id, st.last_completed);
    }
    return s + " (from pg_status; no entry is marked completed)";
  }
  return "none recorded";
}

struct Lag {
  std::string pg;
  int64_t max_seq;
  std::vector<std::pair<int64_t, int64_t>> behind;  // rank, last seq
};

std::vector<Lag> Lagging(const LoadResult& load) {
  std::map<std::string, std::map<int64_t, int64_t>> last;  // pg label -> rank -> last seq
  for (const Dump& d : load.dumps) {
    std::map<std::pair<Sym, Sym>, int64_t> by_pg;  // per dump: few PGs, no string per entry
    for (const Entry& e : d.entries) {
      if (e.is_p2p) continue;
      auto [it, added] = by_pg.emplace(std::make_pair(e.pg_name, e.pg_desc), e.collective_seq_id);
      if (!added) it->second = std::max(it->second, e.collective_seq_id);
    }
    for (auto& [pg, seq] : by_pg) last[PgLabel(d.sym(pg.first), d.sym(pg.second))][d.rank] = seq;
  }
  std::vector<Lag> lags;
  for (auto& [pg, ranks] : last) {
    int64_t mx = 0;
    for (auto [r, s] : ranks) mx = std::max(mx, s);
    Lag lag{pg, mx, {}};
    for (auto [r, s] : ranks) {
      if (s < mx) lag.behind.push_back({r, s});
    }
    if (!lag.behind.empty()) lags.push_back(std::move(lag));
  }
  return lags;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> GroupLines(
    const std::vector<RankLine>& lines) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  std::map<std::string, size_t> at;
  for (const RankLine& l : lines) {
    auto it = at.find(l.last_completed);
    if (it == at.end()) {
      at[l.last_completed] = out.size();
      out.push_back({l.last_completed, {l.rank}});
    } else {
      out[it->second].second.push_back(l.rank);
    }
  }
  return out;
}

std::string FrameText(const Dump& d, const Entry& e) {
  if (e.stack < 0) return "";
  std::string s;
  for (uint32_t fi : d.stacks[e.stack]) {
    const Frame& fr = d.frames[fi];
    s += fmt::format("    {} at {}:{}\n", fr.name, fr.filename, fr.line);
  }
  return s;
}

std::vector<int64_t> MissingRanks(const LoadResult& load, const Analysis& a) {
  std::vector<int64_t> r = a.missing_dump_ranks;
  for (const BadFile& b : load.bad) {
    if (b.rank >= 0 && (load.world_size == 0 || b.rank < load.world_size)) r.push_back(b.rank);
  }
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

}  // namespace

const Finding* HeadlineFinding(const Analysis& analysis) {
  for (const Finding& f : analysis.findings) {
    if (f.first_in_pg) return &f;
  }
  return nullptr;
}

bool Conclusive(const Analysis& analysis) {
  const Finding* head = HeadlineFinding(analysis);
  return head && Suffix(*head).ends_with("- conclusive");
}

std::string VerdictLine(const LoadResult& load, const Analysis& a) {
  const Finding* f = HeadlineFinding(a);
  if (!f) {
    return fmt::format("no desync: {} collectives matched across {} (fr_trace finds no mismatch)",
                       a.collectives_matched, load.dumps.empty() ? "no ranks" : Ranks([&] {
                         std::vector<int64_t> r;
                         for (const Dump& d : load.dumps) r.push_back(d.rank);
                         return r;
                       }()));
  }
  if (RankStopped(*f)) {
    // "rank 1 stopped issuing collectives at pg 0 (default_pg) seq 65 (...); rank 0 waits in seq 66
    // all_gather ...".
    std::map<int64_t, std::vector<int64_t>> by_seq;
    for (const StoppedRank& s : f->stopped) by_seq[s.last_seq].push_back(s.rank);
    std::string line;
    for (const auto& [seq, ranks] : by_seq) {
      line += fmt::format(
          "{}{} stopped issuing collectives {} {}", line.empty() ? "" : "; ", Ranks(ranks),
          line.empty() ? "at " + PgLabel(f->pg_name, f->pg_desc) : std::string("at"),
          seq < 0 ? std::string("before its first") : fmt::format("seq {}", seq));
    }
    line += " (exited, or hangs outside a collective)";
    bool first = true;
    for (const auto& [label, ranks] : SlotGroups(*f)) {
      line += fmt::format("; {} {} in {}{}", Ranks(ranks), ranks.size() == 1 ? "waits" : "wait",
                          first ? fmt::format("seq {} ", f->collective_seq_id) : "", label);
      first = false;
    }
    if (!f->missing_dump_ranks.empty())
      line += fmt::format("; {} left no dump", Ranks(f->missing_dump_ranks));
    return line + ": " + Suffix(*f);
  }
  if (f->kind == FindingKind::kMissingDumps) {
    // Every slot of a PG with a member missing is undecided from its first on:
    // say where the dumps present end, which is where they wait.
    std::string line = fmt::format(
        "undecided: {} left no dump (stopped progressing, or killed before it could write one)",
        Ranks(f->missing_dump_ranks));
    std::vector<std::pair<std::string, std::vector<int64_t>>> last;
    for (const Dump& d : load.dumps) {
      const Entry* e = nullptr;
      for (auto it = d.entries.rbegin(); it != d.entries.rend() && !e; ++it) {
        if (d.sym(it->pg_name) == f->pg_name) e = &*it;
      }
      if (!e) continue;
      OpName name = ParseOpName(d.sym(e->profiling_name));
      std::string label =
          fmt::format("seq {} {}", e->collective_seq_id, OpLabel({d.rank, &d, e, &name}));
      auto it =
          std::find_if(last.begin(), last.end(), [&](const auto& x) { return x.first == label; });
      if (it == last.end())
        last.push_back({label, {d.rank}});
      else
        it->second.push_back(d.rank);
    }
    for (size_t i = 0; i < last.size(); ++i) {
      line += fmt::format("; {} last in {}{}", Ranks(last[i].second),
                          i == 0 ? PgLabel(f->pg_name, f->pg_desc) + " " : "", last[i].first);
    }
    return line + ": " + Suffix(*f);
  }
  // Without the missing dumps nothing can be blamed: not called a desync.
  std::string line = fmt::format(
      "{} at {} seq {}: ", f->kind == FindingKind::kMissingDumps ? "undecided" : "desync",
      PgLabel(f->pg_name, f->pg_desc), f->collective_seq_id);
  bool first = true;
  for (const auto& [label, ranks] : SlotGroups(*f)) {
    line += fmt::format("{}{} in {}", first ? "" : "; ", Ranks(ranks), label);
    first = false;
  }
  if (!f->missing_ranks.empty())
    line += fmt::format("; {} never issued it", Ranks(f->missing_ranks));
  if (!f->missing_dump_ranks.empty())
    line += fmt::format("; {} left no dump", Ranks(f->missing_dump_ranks));
  return line + ": " + Suffix(*f);
}

std::string RenderText(const std::string& dir, const LoadResult& load, const Analysis& a) {
  std::string out = "verdict: " + VerdictLine(load, a) + "\n";
  const Finding* head = HeadlineFinding(a);
  if (head && !DifferenceNote(*head).empty()) out += "note: " + DifferenceNote(*head) + "\n";
  std::vector<int64_t> read;
  std::map<std::string, int> versions;
  for (const Dump& d : load.dumps) {
    read.push_back(d.rank);
    ++versions[d.version + (d.format == DumpFormat::kPickle ? " pickle" : " json")];
  }
  std::string vs;
  for (auto& [v, n] : versions) vs += fmt::format("{}{} ({} dumps)", vs.empty() ? "" : ", ", v, n);
  out += fmt::format("dumps: {} read from {} (prefix '{}', version {}), world size {}\n",
                     Ranks(read), dir, load.prefix, vs, load.world_size);
  for (const BadFile& b : load.bad) out += fmt::format("bad file: {}\n", b.status.message());
  std::vector<int64_t> missing = MissingRanks(load, a);
  out += fmt::format("missing ranks: {}\n", missing.empty() ? "none" : CompactRanges(missing));
  out += fmt::format("collectives matched on all ranks: {}\n", a.collectives_matched);
  std::vector<Lag> lags = Lagging(load);
  if (lags.empty())
    out += "lagging ranks: none (every rank's last entry has the same sequence id per pg)\n";
  for (const Lag& lag : lags) {
    std::map<int64_t, std::vector<int64_t>> by_seq;
    for (auto [r, s] : lag.behind) by_seq[s].push_back(r);
    for (auto& [s, ranks] : by_seq) {
      out += fmt::format("lagging ranks: {} last issued seq {} in {}, others reached {}\n",
                         Ranks(ranks), s, lag.pg, lag.max_seq);
    }
  }
  std::vector<RankLine> lines;
  for (const Dump& d : load.dumps) lines.push_back({d.rank, LastCompleted(d)});
  out += "last completed collective per rank:\n";
  for (auto& [text, ranks] : GroupLines(lines))
    out += fmt::format("  {}: {}\n", Ranks(ranks), text);
  if (head) {
    // Stack frames of the mismatched entry, grouped by identical stacks.
    std::vector<std::pair<std::string, std::vector<int64_t>>> stacks;
    for (const SlotEntry& s : head->entries) {
      std::string text = fmt::format("{}:\n", OpLabel(s)) + FrameText(*s.dump, *s.entry);
      if (s.entry->stack < 0) continue;
      auto it = std::find_if(stacks.begin(), stacks.end(),
                             [&](const auto& x) { return x.first == text; });
      if (it == stacks.end())
        stacks.push_back({text, {s.rank}});
      else
        it->second.push_back(s.rank);
    }
    if (stacks.empty()) {
      out +=
          "stack frames: none in these dumps (JSON dumps and dumps taken without stack traces have "
          "none)\n";
    } else {
      out += fmt::format("stack frames of the entries at {} seq {}:\n",
                         PgLabel(head->pg_name, head->pg_desc), head->collective_seq_id);
      for (auto& [text, ranks] : stacks) out += fmt::format("  {} in {}", Ranks(ranks), text);
    }
    // Where a rank that stopped was last seen issuing a collective.
    for (const StoppedRank& st : head->stopped) {
      if (!st.last.entry || st.last.entry->stack < 0) continue;
      out += fmt::format("stack frames of rank {}'s last entry (seq {} {}):\n", st.rank,
                         st.last_seq, OpLabel(st.last)) +
             FrameText(*st.last.dump, *st.last.entry);
    }
  }
  if (!a.findings.empty()) {
    out +=
        "findings (fr_trace categories; after a pg's first mismatch its later findings are "
        "low-reliability):\n";
    size_t shown = 0;
    for (const Finding& f : a.findings) {
      if (shown++ == 20) {
        out += fmt::format("  ... {} more (see --json)\n",
                           a.findings.size() - 20 + a.findings_dropped);
        break;
      }
      std::string what;
      if (f.kind == FindingKind::kErrors || f.kind == FindingKind::kP2pMismatch ||
          f.kind == FindingKind::kAllToAllNumel) {
        for (const Culprit& c : f.culprits)
          what += fmt::format("{}culprit rank {}: {}", what.empty() ? "" : "; ", c.rank,
                              c.info.ToString());
      } else if (f.kind == FindingKind::kMissingRanks) {
        what = fmt::format("not all ranks joining, missing {}", Ranks(f.missing_ranks));
      } else if (f.kind == FindingKind::kMissingDumps) {
        what = fmt::format("cannot decide: no dumps from {}", Ranks(f.missing_dump_ranks));
      } else {
        what = "no errors found for this entry";
      }
      out += fmt::format(
          "  {}{} seq {} (record {}, {}): {}\n", f.first_in_pg ? "" : "(after first) ",
          PgLabel(f.pg_name, f.pg_desc), f.collective_seq_id, f.record_id,
          f.entries.empty() ? "?"
                            : f.entries.front().dump->sym(f.entries.front().entry->profiling_name),
          what);
    }
  }
  for (const std::string& n : a.notes) out += "note: " + n + "\n";
  return out;
}

namespace {

void FindingJson(JsonWriter& w, const Finding& f) {
  w.BeginObject().Key("kind").Str(FindingKindName(f.kind)).Key("first_in_pg").Bool(f.first_in_pg);
  w.Key("pg").Str(f.pg_name).Key("pg_desc").Str(f.pg_desc);
  w.Key("collective_seq_id").Int(f.collective_seq_id).Key("p2p_seq_id").Int(f.p2p_seq_id);
  w.Key("record_id").Int(f.record_id).Key("reference_rank").Int(f.reference_rank);
  w.Key("fr_trace_reference_rank").Int(f.fr_trace_reference_rank);
  w.Key("expected_ranks").Str(CompactRanges(f.expected_ranks));
  w.Key("missing_ranks").IntArray(f.missing_ranks);
  w.Key("missing_dump_ranks").IntArray(f.missing_dump_ranks);
  w.Key("rank_stopped").Bool(RankStopped(f)).Key("stopped").BeginArray();
  for (const auto& s : f.stopped) {
    w.BeginObject().Key("rank").Int(s.rank).Key("last_seq").Int(s.last_seq);
    w.Key("last_op").Str(s.last.entry ? OpLabel(s.last) : "").EndObject();
  }
  w.EndArray().Key("culprits").BeginArray();
  for (const auto& c : f.culprits) {
    w.BeginObject().Key("rank").Int(c.rank).Key("error_type").Str(MatchStateName(c.info.state));
    w.Key("detail").Str(c.info.detail).EndObject();
  }
  w.EndArray().Key("groups").BeginArray();
  for (auto& [label, ranks] : SlotGroups(f))
    w.BeginObject().Key("ranks").Str(CompactRanges(ranks)).Key("op").Str(label).EndObject();
  w.EndArray().EndObject();
}

}  // namespace

std::string RenderJson(const std::string& dir, const LoadResult& load, const Analysis& a) {
  const Finding* head = HeadlineFinding(a);
  JsonWriter w;
  w.BeginObject().Key("dir").Str(dir).Key("prefix").Str(load.prefix);
  w.Key("world_size").Int(load.world_size).Key("verdict").Str(VerdictLine(load, a));
  w.Key("desync").Bool(head && head->kind != FindingKind::kMissingDumps && !RankStopped(*head));
  w.Key("conclusive").Bool(Conclusive(a));
  w.Key("differs_from_fr_trace").Str(head ? DifferenceNote(*head) : "");
  std::vector<int64_t> read;
  for (const Dump& d : load.dumps) read.push_back(d.rank);
  w.Key("ranks_read").IntArray(read);
  w.Key("missing_ranks").IntArray(MissingRanks(load, a));
  w.Key("bad_files").BeginArray();
  for (const BadFile& b : load.bad) {
    w.BeginObject().Key("path").Str(b.path).Key("rank").Int(b.rank);
    w.Key("error").Str(b.status.message()).EndObject();
  }
  w.EndArray().Key("collectives_matched").Int(static_cast<int64_t>(a.collectives_matched));
  w.Key("findings").BeginArray();
  for (const Finding& f : a.findings) FindingJson(w, f);
  w.EndArray().Key("findings_dropped").Int(static_cast<int64_t>(a.findings_dropped));
  w.Key("last_completed").BeginArray();
  std::vector<RankLine> lines;
  for (const Dump& d : load.dumps) lines.push_back({d.rank, LastCompleted(d)});
  for (auto& [text, ranks] : GroupLines(lines)) {
    w.BeginObject().Key("ranks").Str(CompactRanges(ranks)).Key("last_completed").Str(text);
    w.EndObject();
  }
  w.EndArray().Key("lagging").BeginArray();
  for (const Lag& lag : Lagging(load)) {
    for (auto [r, s] : lag.behind) {
      w.BeginObject().Key("rank").Int(r).Key("pg").Str(lag.pg).Key("last_seq").Int(s);
      w.Key("max_seq").Int(lag.max_seq).EndObject();
    }
  }
  w.EndArray().Key("notes").StrArray(a.notes).EndObject();
  return w.Line();
}

}  // namespace ek::flightrec
