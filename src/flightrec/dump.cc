// One file over 600 lines: one Builder, whose parsers share its symbol table.
#include "flightrec/dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include "flightrec/json_reader.h"
#include "flightrec/pickle_reader.h"

namespace ek::flightrec {

const PgConfig* Dump::FindPg(std::string_view name) const {
  for (const auto& pg : pg_configs) {
    if (pg.name == name) return &pg;
  }
  return nullptr;
}

std::vector<int64_t> Dump::WorldRanks() const {
  const PgConfig* best = nullptr;
  for (const auto& pg : pg_configs) {
    if (pg.desc == "default_pg") return pg.ranks;
  }
  if (const PgConfig* pg = FindPg("0")) return pg->ranks;
  for (const auto& pg : pg_configs) {
    if (!best || pg.ranks.size() > best->ranks.size()) best = &pg;
  }
  return best ? best->ranks : std::vector<int64_t>{};
}

namespace {

enum class Field : uint8_t {
  kUnknown,
  kFrames,
  kRecordId,
  kPgId,
  kProcessGroup,
  kCollectiveSeqId,
  kP2pSeqId,
  kOpId,
  kProfilingName,
  kTimeCreated,
  kDuration,
  kInputSizes,
  kInputDtypes,
  kOutputSizes,
  kOutputDtypes,
  kState,
  kTimeStarted,
  kTimeCompleted,
  kRetired,
  kTimeout,
  kIsP2p,
  kSeqId,
  kNotCached = 0xff,
};

Field FieldOf(std::string_view k) {
  static const std::unordered_map<std::string_view, Field> kFields = {
      {"frames", Field::kFrames},
      {"record_id", Field::kRecordId},
      {"pg_id", Field::kPgId},
      {"process_group", Field::kProcessGroup},
      {"collective_seq_id", Field::kCollectiveSeqId},
      {"p2p_seq_id", Field::kP2pSeqId},
      {"op_id", Field::kOpId},
      {"profiling_name", Field::kProfilingName},
      {"time_created_ns", Field::kTimeCreated},
      {"duration_ms", Field::kDuration},
      {"input_sizes", Field::kInputSizes},
      {"input_dtypes", Field::kInputDtypes},
      {"output_sizes", Field::kOutputSizes},
      {"output_dtypes", Field::kOutputDtypes},
      {"state", Field::kState},
      {"time_discovered_started_ns", Field::kTimeStarted},
      {"time_discovered_completed_ns", Field::kTimeCompleted},
      {"retired", Field::kRetired},
      {"timeout_ms", Field::kTimeout},
      {"is_p2p", Field::kIsP2p},
      {"seq_id", Field::kSeqId},
  };
  auto it = kFields.find(k);
  return it == kFields.end() ? Field::kUnknown : it->second;
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Builder {
 public:
  Builder(const Document& doc, Dump* dump)
      : doc_(doc),
        dump_(dump),
        node_sym_(doc.node_count(), kNoSym),
        key_field_(doc.node_count(), Field::kNotCached) {}

  Status Build();

 private:
  static constexpr Sym kNoSym = 0xffffffffu;

  Status Bad(std::string what) { return CorruptError(std::move(what)); }
  static Status In(size_t index, Status s) {
    return s.ok() ? s : s.WithContext(fmt::format("entry {}", index));
  }
  Sym Intern(std::string_view s) {
    auto it = index_.find(s);
    if (it != index_.end()) return it->second;
    Sym id = static_cast<Sym>(dump_->symbols.size());
    dump_->symbols.emplace_back(s);
    index_.emplace(std::string(s), id);
    return id;
  }
  Sym InternNode(NodeId id) {
    if (node_sym_[id] == kNoSym) node_sym_[id] = Intern(doc_.AsString(id));
    return node_sym_[id];
  }
  Field KeyField(NodeId key) {
    if (key_field_[key] == Field::kNotCached) key_field_[key] = FieldOf(doc_.AsString(key));
    return key_field_[key];
  }

  Status ParseVersion();
  Status ParsePgConfig(NodeId node);
  Status ParsePgStatus(NodeId node);
  Status ParseEntry(size_t index, NodeId node, Entry* e);
  Status ParseSizes(NodeId node, Sym* repr, FirstShape* first, int64_t* numel0, int64_t* numel,
                    int32_t* tensors);
  Status ParseSizesSlow(NodeId node, Sym* repr, FirstShape* first, int64_t* numel0, int64_t* numel,
                        int32_t* tensors);
  struct SizesInfo {
    Sym repr;
    FirstShape first;
    int64_t numel0, numel;
    int32_t tensors;
  };
  struct FlatHash {
    size_t operator()(const std::vector<int64_t>& v) const {
      uint64_t h = 1469598103934665603ull;
      for (int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 1099511628211ull;
      return h;
    }
  };
  std::vector<int64_t> flat_;
  std::unordered_map<std::vector<int64_t>, SizesInfo, FlatHash> sizes_cache_;
  Status ParseDtypes(NodeId node, Sym* repr, Sym* set);
  Status ParseFrames(NodeId node, int32_t* stack);
  Result<int64_t> IntOf(NodeId node, std::string_view what);
  Result<std::vector<int64_t>> RankList(NodeId node);

  const Document& doc_;
  Dump* dump_;
  std::unordered_map<std::string, Sym, StringHash, std::equal_to<>> index_;
  std::vector<Sym> node_sym_;
  std::vector<Field> key_field_;
  std::unordered_map<NodeId, uint32_t> frame_index_;
  struct SigHash {
    size_t operator()(const std::array<Sym, 7>& a) const {
      uint64_t h = 1469598103934665603ull;
      for (Sym s : a) h = (h ^ s) * 1099511628211ull;
      return h;
    }
  };
  std::unordered_map<std::array<Sym, 7>, uint32_t, SigHash> signature_index_;
  // One-element dtype lists keyed by the element's node (memoized strings
  // share nodes in a pickle): repr and set symbols.
  std::unordered_map<NodeId, std::pair<Sym, Sym>> dtype_cache_;
  std::string scratch_;
  std::vector<std::string_view> dtypes_;
};

Result<int64_t> Builder::IntOf(NodeId node, std::string_view what) {
  switch (doc_.kind(node)) {
    case Kind::kInt:
      return doc_.AsInt(node);
    case Kind::kBool:
      return doc_.AsBool(node) ? 1 : 0;
    case Kind::kString: {  // JSON pg_status values are decimal strings
      std::string_view s = doc_.AsString(node);
      int64_t v = 0;
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec == std::errc() && p == s.data() + s.size()) return v;
      break;
    }
    default:
      break;
  }
  return Bad(fmt::format("{} is a {}, expected an int", what, KindName(doc_.kind(node))));
}

Result<std::vector<int64_t>> Builder::RankList(NodeId node) {
  std::vector<int64_t> ranks;
  if (doc_.kind(node) == Kind::kList || doc_.kind(node) == Kind::kTuple) {
    for (NodeId r : doc_.Children(node)) {
      EK_ASSIGN_OR_RETURN(int64_t v, IntOf(r, "a pg_config rank"));
      ranks.push_back(v);
    }
    return ranks;
  }
  if (doc_.kind(node) != Kind::kString)
    return Bad("pg_config ranks is neither a string nor a list");
  // "[0, 1, 2, 3]": torch writes the Python repr of the rank list.
  std::string_view s = doc_.AsString(node);
  size_t i = 0;
  auto skip = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',' || s[i] == '[' || s[i] == ']')) ++i;
  };
  skip();
  while (i < s.size()) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
    if (ec != std::errc()) return Bad(fmt::format("pg_config ranks '{}' is not a rank list", s));
    i = p - s.data();
    ranks.push_back(v);
    skip();
  }
  return ranks;
}

Status Builder::ParseVersion() {
  const std::string& v = dump_->version;
  int major = 0, minor = 0;
  auto dot = v.find('.');
  bool ok = dot != std::string::npos;
  if (ok) {
    auto r1 = std::from_chars(v.data(), v.data() + dot, major);
    auto r2 = std::from_chars(v.data() + dot + 1, v.data() + v.size(), minor);
    ok = r1.ec == std::errc() && r1.ptr == v.data() + dot && r2.ec == std::errc() &&
         r2.ptr == v.data() + v.size();
  }
  if (!ok || major < 1 || major > 2 || (major == 2 && minor > kNewestMinor)) {
    return UnsupportedError(fmt::format(
        "unknown dump version '{}' (evenkeel reads 1.x and 2.0-2.{})", v, kNewestMinor));
  }
  dump_->major = major;
  dump_->minor = minor;
  return Status::Ok();
}

Status Builder::ParsePgConfig(NodeId node) {
  if (doc_.kind(node) != Kind::kDict)
    return Bad(fmt::format("pg_config is a {}, expected a dict", KindName(doc_.kind(node))));
  auto kids = doc_.Children(node);
  for (size_t i = 0; i < kids.size(); i += 2) {
    PgConfig pg;
    NodeId key = kids[i], val = kids[i + 1];
    if (doc_.kind(key) == Kind::kString)
      pg.name = doc_.AsString(key);
    else if (doc_.kind(key) == Kind::kInt)
      pg.name = std::to_string(doc_.AsInt(key));  // 1.x: pg_id -> ranks
    else
      return Bad("pg_config key is neither a string nor an int");
    if (doc_.kind(val) == Kind::kDict) {
      NodeId x;
      if (doc_.Find(val, "name", &x) && doc_.kind(x) == Kind::kString) pg.name = doc_.AsString(x);
      if (doc_.Find(val, "desc", &x) && doc_.kind(x) == Kind::kString) pg.desc = doc_.AsString(x);
      if (!doc_.Find(val, "ranks", &x))
        return Bad(fmt::format("pg_config '{}' has no ranks", pg.name));
      EK_ASSIGN_OR_RETURN(pg.ranks, RankList(x));
    } else {
      pg.desc = "undefined";
      EK_ASSIGN_OR_RETURN(pg.ranks, RankList(val));
    }
    dump_->pg_configs.push_back(std::move(pg));
  }
  return Status::Ok();
}

Status Builder::ParsePgStatus(NodeId node) {
  if (doc_.kind(node) != Kind::kDict) return Bad("pg_status is not a dict");
  auto kids = doc_.Children(node);
  for (size_t i = 0; i < kids.size(); i += 2) {
    PgStatus st;
    if (doc_.kind(kids[i]) == Kind::kString)
      st.pg_id = doc_.AsString(kids[i]);
    else if (doc_.kind(kids[i]) == Kind::kInt)
      st.pg_id = std::to_string(doc_.AsInt(kids[i]));
    if (doc_.kind(kids[i + 1]) != Kind::kDict) return Bad("pg_status value is not a dict");
    NodeId x;
    if (doc_.Find(kids[i + 1], "last_enqueued_collective", &x)) {
      EK_ASSIGN_OR_RETURN(st.last_enqueued, IntOf(x, "last_enqueued_collective"));
    }
    if (doc_.Find(kids[i + 1], "last_started_collective", &x)) {
      EK_ASSIGN_OR_RETURN(st.last_started, IntOf(x, "last_started_collective"));
    }
    if (doc_.Find(kids[i + 1], "last_completed_collective", &x)) {
      EK_ASSIGN_OR_RETURN(st.last_completed, IntOf(x, "last_completed_collective"));
    }
    dump_->pg_status.push_back(std::move(st));
  }
  return Status::Ok();
}

Status Builder::ParseSizes(NodeId node, Sym* repr, FirstShape* first, int64_t* numel0,
                           int64_t* numel, int32_t* tensors) {
  if (doc_.kind(node) != Kind::kList && doc_.kind(node) != Kind::kTuple)
    return Bad("sizes are not a list");
  // Size lists repeat on almost every entry: look the dimensions up before
  // formatting and interning their repr. Key: the flattened shape, each inner
  // list preceded by its length (so [[4, 256]] != [[4], [256]]).
  flat_.clear();
  bool simple = true;
  for (NodeId inner : doc_.Children(node)) {
    if (doc_.kind(inner) != Kind::kList && doc_.kind(inner) != Kind::kTuple) {
      simple = false;
      break;
    }
    auto dims = doc_.Children(inner);
    flat_.push_back(static_cast<int64_t>(dims.size()));
    for (NodeId d : dims) {
      if (doc_.kind(d) != Kind::kInt) {
        simple = false;
        break;
      }
      flat_.push_back(doc_.AsInt(d));
    }
    if (!simple) break;
  }
  if (simple) {
    auto it = sizes_cache_.find(flat_);
    if (it != sizes_cache_.end()) {
      const SizesInfo& c = it->second;
      *repr = c.repr, *first = c.first, *numel0 = c.numel0, *numel = c.numel, *tensors = c.tensors;
      return Status::Ok();
    }
    Status s = ParseSizesSlow(node, repr, first, numel0, numel, tensors);
    if (s.ok()) sizes_cache_.emplace(flat_, SizesInfo{*repr, *first, *numel0, *numel, *tensors});
    return s;
  }
  return ParseSizesSlow(node, repr, first, numel0, numel, tensors);
}

Status Builder::ParseSizesSlow(NodeId node, Sym* repr, FirstShape* first, int64_t* numel0,
                               int64_t* numel, int32_t* tensors) {
  scratch_.clear();
  scratch_ += '[';
  auto outer = doc_.Children(node);
  *first = outer.empty() ? FirstShape::kAbsent : FirstShape::kEmpty;
  *numel0 = 1;
  *numel = 0;
  *tensors = static_cast<int32_t>(outer.size());
  char buf[24];
  for (size_t i = 0; i < outer.size(); ++i) {
    NodeId inner = outer[i];
    if (doc_.kind(inner) != Kind::kList && doc_.kind(inner) != Kind::kTuple)
      return Bad("a tensor's sizes are not a list");
    if (i) scratch_ += ", ";
    scratch_ += '[';
    auto dims = doc_.Children(inner);
    int64_t n = 1;
    for (size_t j = 0; j < dims.size(); ++j) {
      if (doc_.kind(dims[j]) != Kind::kInt) return Bad("a tensor dimension is not an int");
      int64_t d = doc_.AsInt(dims[j]);
      // Python's ints do not overflow; ours must not either (a crafted dump
      // was signed-overflow UB here). No real tensor has 2^63 elements.
      if (__builtin_mul_overflow(n, d, &n) ||
          (i == 0 && __builtin_mul_overflow(*numel0, d, numel0))) {
        return Bad("a tensor's element count overflows 64 bits");
      }
      if (j) scratch_ += ", ";
      auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
      scratch_.append(buf, p);
    }
    scratch_ += ']';
    if (__builtin_add_overflow(*numel, n, numel))
      return Bad("the tensors' element count overflows 64 bits");
    if (i == 0 && !dims.empty()) *first = FirstShape::kNonEmpty;
  }
  scratch_ += ']';
  *repr = Intern(scratch_);
  return Status::Ok();
}

Status Builder::ParseDtypes(NodeId node, Sym* repr, Sym* set) {
  if (doc_.kind(node) != Kind::kList && doc_.kind(node) != Kind::kTuple)
    return Bad("dtypes are not a list");
  std::span<const NodeId> only = doc_.Children(node);
  if (only.size() == 1) {
    auto it = dtype_cache_.find(only[0]);
    if (it != dtype_cache_.end()) {
      *repr = it->second.first;
      *set = it->second.second;
      return Status::Ok();
    }
  }
  scratch_.clear();
  scratch_ += '[';
  dtypes_.clear();
  auto kids = doc_.Children(node);
  for (size_t i = 0; i < kids.size(); ++i) {
    if (doc_.kind(kids[i]) != Kind::kString) return Bad("a dtype is not a string");
    std::string_view d = doc_.AsString(kids[i]);
    if (i) scratch_ += ", ";
    scratch_ += '\'';
    scratch_ += d;
    scratch_ += '\'';
    dtypes_.push_back(d);
  }
  scratch_ += ']';
  *repr = Intern(scratch_);
  std::sort(dtypes_.begin(), dtypes_.end());
  dtypes_.erase(std::unique(dtypes_.begin(), dtypes_.end()), dtypes_.end());
  scratch_.assign("{");
  for (size_t i = 0; i < dtypes_.size(); ++i) {
    if (i) scratch_ += ", ";
    scratch_ += '\'';
    scratch_ += dtypes_[i];
    scratch_ += '\'';
  }
  scratch_ += '}';
  *set = Intern(scratch_);
  if (only.size() == 1) dtype_cache_.emplace(only[0], std::make_pair(*repr, *set));
  return Status::Ok();
}

Status Builder::ParseFrames(NodeId node, int32_t* stack) {
  if (doc_.kind(node) == Kind::kNone) return Status::Ok();
  if (doc_.kind(node) != Kind::kList) return Bad("frames is not a list");
  auto kids = doc_.Children(node);
  if (kids.empty()) return Status::Ok();
  std::vector<uint32_t> ids;
  ids.reserve(kids.size());
  for (NodeId f : kids) {
    auto it = frame_index_.find(f);  // frame dicts are shared objects in the pickle
    if (it == frame_index_.end()) {
      if (doc_.kind(f) != Kind::kDict) return Bad("a frame is not a dict");
      Frame fr;
      NodeId x;
      if (doc_.Find(f, "name", &x) && doc_.kind(x) == Kind::kString) fr.name = doc_.AsString(x);
      if (doc_.Find(f, "filename", &x) && doc_.kind(x) == Kind::kString)
        fr.filename = doc_.AsString(x);
      if (doc_.Find(f, "line", &x) && doc_.kind(x) == Kind::kInt) fr.line = doc_.AsInt(x);
      dump_->frames.push_back(std::move(fr));
      it = frame_index_.emplace(f, static_cast<uint32_t>(dump_->frames.size() - 1)).first;
    }
    ids.push_back(it->second);
  }
  dump_->stacks.push_back(std::move(ids));
  *stack = static_cast<int32_t>(dump_->stacks.size() - 1);
  return Status::Ok();
}

Status Builder::ParseEntry(size_t index, NodeId node, Entry* e) {
  if (doc_.kind(node) != Kind::kDict)
    return Bad(fmt::format("entry {} is a {}, expected a dict", index, KindName(doc_.kind(node))));
  uint32_t seen = 0;
  auto kids = doc_.Children(node);
  auto need_string = [&](NodeId v, const char* name) -> Status {
    if (doc_.kind(v) != Kind::kString)
      return Bad(
          fmt::format("entry {}: {} is a {}, expected a str", index, name, KindName(doc_.kind(v))));
    return Status::Ok();
  };
  auto int_field = [&](NodeId v, const char* name, int64_t* out) -> Status {
    if (doc_.kind(v) == Kind::kInt) {
      *out = doc_.AsInt(v);
      return Status::Ok();
    }  // the common case
    if (doc_.kind(v) == Kind::kNone) {
      *out = 0;
      return Status::Ok();
    }
    auto r = IntOf(v, name);
    if (!r.ok()) return r.status().WithContext(fmt::format("entry {}", index));
    *out = *r;
    return Status::Ok();
  };
  for (size_t i = 0; i < kids.size(); i += 2) {
    NodeId k = kids[i], v = kids[i + 1];
    if (doc_.kind(k) != Kind::kString) continue;
    Field f = KeyField(k);
    seen |= 1u << static_cast<int>(f);
    switch (f) {
      case Field::kRecordId:
        EK_RETURN_IF_ERROR(int_field(v, "record_id", &e->record_id));
        break;
      case Field::kPgId:
        EK_RETURN_IF_ERROR(int_field(v, "pg_id", &e->pg_id));
        break;
      case Field::kCollectiveSeqId:
      case Field::kSeqId:
        EK_RETURN_IF_ERROR(int_field(v, "collective_seq_id", &e->collective_seq_id));
        break;
      case Field::kP2pSeqId:
        EK_RETURN_IF_ERROR(int_field(v, "p2p_seq_id", &e->p2p_seq_id));
        break;
      case Field::kOpId:
        EK_RETURN_IF_ERROR(int_field(v, "op_id", &e->op_id));
        break;
      case Field::kTimeCreated:
        EK_RETURN_IF_ERROR(int_field(v, "time_created_ns", &e->time_created_ns));
        break;
      case Field::kTimeStarted:
        EK_RETURN_IF_ERROR(
            int_field(v, "time_discovered_started_ns", &e->time_discovered_started_ns));
        break;
      case Field::kTimeCompleted:
        EK_RETURN_IF_ERROR(
            int_field(v, "time_discovered_completed_ns", &e->time_discovered_completed_ns));
        break;
      case Field::kTimeout:
        EK_RETURN_IF_ERROR(int_field(v, "timeout_ms", &e->timeout_ms));
        break;
      case Field::kDuration:
        if (doc_.kind(v) == Kind::kFloat || doc_.kind(v) == Kind::kInt)
          e->duration_ms = doc_.AsFloat(v);
        break;
      case Field::kRetired:
        e->retired = doc_.kind(v) == Kind::kBool && doc_.AsBool(v);
        break;
      case Field::kIsP2p:
        e->is_p2p = doc_.kind(v) == Kind::kBool && doc_.AsBool(v);
        break;
      case Field::kProfilingName:
        EK_RETURN_IF_ERROR(need_string(v, "profiling_name"));
        e->profiling_name = InternNode(v);
        break;
      case Field::kState:
        EK_RETURN_IF_ERROR(need_string(v, "state"));
        e->state = InternNode(v);
        break;
      case Field::kProcessGroup: {
        auto pg = doc_.Children(v);
        if ((doc_.kind(v) != Kind::kTuple && doc_.kind(v) != Kind::kList) || pg.size() != 2 ||
            doc_.kind(pg[0]) != Kind::kString || doc_.kind(pg[1]) != Kind::kString) {
          return Bad(fmt::format("entry {}: process_group is not a (name, desc) pair", index));
        }
        e->pg_name = InternNode(pg[0]);
        e->pg_desc = InternNode(pg[1]);
        break;
      }
      case Field::kInputSizes:
        EK_RETURN_IF_ERROR(In(index, ParseSizes(v, &e->input_sizes, &e->input0, &e->input_numel0,
                                                &e->input_numel, &e->input_tensors)));
        break;
      case Field::kOutputSizes:
        EK_RETURN_IF_ERROR(In(index, ParseSizes(v, &e->output_sizes, &e->output0, &e->output_numel0,
                                                &e->output_numel, &e->output_tensors)));
        break;
      case Field::kInputDtypes:
        EK_RETURN_IF_ERROR(In(index, ParseDtypes(v, &e->input_dtypes, &e->input_dtype_set)));
        break;
      case Field::kOutputDtypes:
        EK_RETURN_IF_ERROR(In(index, ParseDtypes(v, &e->output_dtypes, &e->output_dtype_set)));
        break;
      case Field::kFrames:
        EK_RETURN_IF_ERROR(In(index, ParseFrames(v, &e->stack)));
        break;
      default:
        break;
    }
  }
  auto has = [&](Field f) { return (seen >> static_cast<int>(f)) & 1u; };
  const char* missing = nullptr;
  if (!has(Field::kRecordId))
    missing = "record_id";
  else if (!has(Field::kProfilingName))
    missing = "profiling_name";
  else if (!has(Field::kState))
    missing = "state";
  else if (!has(Field::kInputSizes))
    missing = "input_sizes";
  else if (!has(Field::kOutputSizes))
    missing = "output_sizes";
  else if (dump_->major >= 2 && !has(Field::kProcessGroup))
    missing = "process_group";
  else if (dump_->major >= 2 && !has(Field::kCollectiveSeqId))
    missing = "collective_seq_id";
  else if (dump_->major < 2 && !has(Field::kSeqId) && !has(Field::kCollectiveSeqId))
    missing = "seq_id";
  if (missing) return Bad(fmt::format("entry {}: missing field '{}'", index, missing));
  if (!has(Field::kProcessGroup)) {  // 1.x: only pg_id; its pg_config is keyed by it
    e->pg_name = Intern(std::to_string(e->pg_id));
    e->pg_desc = Intern("undefined");
  }
  if (!has(Field::kInputDtypes) || !has(Field::kOutputDtypes)) {  // 1.x has no dtypes
    Sym none = Intern("[]"), empty_set = Intern("set()");
    if (!has(Field::kInputDtypes)) e->input_dtypes = none, e->input_dtype_set = empty_set;
    if (!has(Field::kOutputDtypes)) e->output_dtypes = none, e->output_dtype_set = empty_set;
  }
  std::array<Sym, 7> sig = {e->profiling_name,  e->input_sizes,      e->output_sizes,
                            e->input_dtype_set, e->output_dtype_set, e->state,
                            e->pg_desc};
  auto [it, added] = signature_index_.emplace(sig, static_cast<uint32_t>(dump_->signatures.size()));
  if (added) dump_->signatures.push_back(sig);
  e->signature = it->second;
  return Status::Ok();
}

Status Builder::Build() {
  NodeId root = doc_.root();
  if (doc_.kind(root) != Kind::kDict)
    return Bad(fmt::format("top level is a {}, expected a dict", KindName(doc_.kind(root))));
  NodeId x;
  if (!doc_.Find(root, "version", &x)) return Bad("no 'version' key: not a flight-recorder dump");
  if (doc_.kind(x) != Kind::kString) return Bad("'version' is not a string");
  dump_->version = doc_.AsString(x);
  EK_RETURN_IF_ERROR(ParseVersion());
  if (doc_.Find(root, "comm_lib_version", &x) || doc_.Find(root, "nccl_version", &x)) {
    if (doc_.kind(x) == Kind::kString) dump_->comm_lib_version = doc_.AsString(x);
  }
  if (!doc_.Find(root, "pg_config", &x)) return Bad("no 'pg_config' key");
  EK_RETURN_IF_ERROR(ParsePgConfig(x));
  if (doc_.Find(root, "pg_status", &x)) EK_RETURN_IF_ERROR(ParsePgStatus(x));
  if (!doc_.Find(root, "entries", &x)) return Status::Ok();  // the JSON form omits an empty list
  if (doc_.kind(x) != Kind::kList) return Bad("'entries' is not a list");
  auto entries = doc_.Children(x);
  dump_->entries.resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EK_RETURN_IF_ERROR(ParseEntry(i, entries[i], &dump_->entries[i]));
  }
  return Status::Ok();
}

}  // namespace

Result<Dump> DumpFromDocument(const Document& doc, DumpFormat format, std::string path,
                              int64_t rank) {
  Dump dump;
  dump.path = std::move(path);
  dump.rank = rank;
  dump.format = format;
  Builder b(doc, &dump);
  Status s = b.Build();
  if (!s.ok()) return s.WithContext(dump.path);
  return dump;
}

Result<Dump> ParseDump(std::string_view bytes, std::string path, int64_t rank) {
  size_t i = 0;
  while (i < bytes.size() &&
         (bytes[i] == ' ' || bytes[i] == '\n' || bytes[i] == '\t' || bytes[i] == '\r'))
    ++i;
  if (i == bytes.size()) return CorruptError(path + ": empty file");
  if (static_cast<uint8_t>(bytes[0]) == 0x80) {
    thread_local Document doc;  // buffers reused across the files a loader thread reads
    Status s = ParsePickleInto(bytes, &doc);
    if (!s.ok()) return s.WithContext(path);
    return DumpFromDocument(doc, DumpFormat::kPickle, std::move(path), rank);
  }
  if (bytes[i] == '{') {
    auto doc = ParseJson(bytes);
    if (!doc.ok()) return doc.status().WithContext(path);
    return DumpFromDocument(*doc, DumpFormat::kJson, std::move(path), rank);
  }
  return CorruptError(fmt::format(
      "{}: neither a pickle (starts with 0x80) nor JSON (starts with '{{'): first byte 0x{:02x}",
      path, static_cast<uint8_t>(bytes[0])));
}

}  // namespace ek::flightrec
