#include "flightrec/pickle_reader.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ek::flightrec {

namespace {

// Opcode names for error messages (pickletools spelling).
const char* OpcodeName(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'I':
      return "INT";
    case 'L':
      return "LONG";
    case 'F':
      return "FLOAT";
    case 'S':
      return "STRING";
    case 'T':
      return "BINSTRING";
    case 'U':
      return "SHORT_BINSTRING";
    case 'V':
      return "UNICODE";
    case 'B':
      return "BINBYTES";
    case 'C':
      return "SHORT_BINBYTES";
    case 0x8e:
      return "BINBYTES8";
    case 0x96:
      return "BYTEARRAY8";
    case 0x97:
      return "NEXT_BUFFER";
    case 0x98:
      return "READONLY_BUFFER";
    case 0x8b:
      return "LONG4";
    case 0x8f:
      return "EMPTY_SET";
    case 0x90:
      return "ADDITEMS";
    case 0x91:
      return "FROZENSET";
    case 'l':
      return "LIST";
    case 'd':
      return "DICT";
    case 'p':
      return "PUT";
    case 'g':
      return "GET";
    case '0':
      return "POP";
    case '1':
      return "POP_MARK";
    case '2':
      return "DUP";
    default:
      return "unknown opcode";
  }
}

constexpr uint32_t kMaxMemoId = 1u << 26;

class Vm {
 public:
  Vm(std::string_view data, Document* doc) : data_(data), doc_(*doc) {
    doc_.Clear();
    doc_.Reserve(data.size() / 4 + 16, data.size() / 4 + 16);
    stack_.reserve(256);
  }

  Status Run() {
    if (data_.empty()) {
      Fail(0, "empty file");
      return error_;
    }
    while (pos_ < data_.size()) {
      size_t at = pos_;
      uint8_t op = static_cast<uint8_t>(data_[pos_++]);
      if (!Step(at, op)) return error_;
      if (stopped_) {
        if (stack_.size() != 1) {
          Fail(at, "STOP with a stack of " + std::to_string(stack_.size()) + " values");
          return error_;
        }
        doc_.set_root(stack_.back());
        return Status::Ok();
      }
    }
    Fail(pos_, "truncated: no STOP opcode before the end of the file");
    return error_;
  }

 private:
  // Records the error and returns false: the VM's hot path passes bools,
  // not Status objects.
  bool Fail(size_t at, const std::string& what) {
    error_ = CorruptError(fmt::format("byte {}: {}", at, what));
    return false;
  }

  // Reads n bytes of operand; false if the file ends first.
  bool Take(size_t n, const char** p) {
    if (data_.size() - pos_ < n) return false;
    *p = data_.data() + pos_;
    pos_ += n;
    return true;
  }
  template <typename T>
  bool TakeLe(T* v) {
    const char* p;
    if (!Take(sizeof(T), &p)) return false;
    std::memcpy(v, p,
                sizeof(T));  // pickle operands are little-endian; so is every host we build on
    return true;
  }
  bool Truncated(size_t at, uint8_t op) {
    return Fail(at, fmt::format("truncated operand of opcode 0x{:02x}", op));
  }

  bool Push(NodeId id) {
    stack_.push_back(id);
    return true;
  }
  bool PushString(size_t at, uint8_t op, uint64_t len) {
    const char* p;
    if (len > data_.size() - pos_ || !Take(len, &p)) return Truncated(at, op);
    return Push(doc_.AddString(std::string_view(p, len)));
  }
  // Pops the items above the topmost mark; `*container` is the value below them.
  bool PopMark(size_t at, std::vector<NodeId>* items, NodeId* container, bool need_container) {
    if (marks_.empty()) return Fail(at, "no MARK to close");
    size_t m = marks_.back();
    marks_.pop_back();
    items->assign(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    if (need_container) {
      if (stack_.empty()) return Fail(at, "no container below MARK");
      *container = stack_.back();
    }
    return true;
  }
  bool Memo(size_t at, uint64_t id) {
    if (stack_.empty()) return Fail(at, "memo store with an empty stack");
    // Every memo store is an opcode, so a valid id is below the file size.
    if (id >= kMaxMemoId || id > data_.size()) return Fail(at, "memo id too large");
    if (id >= memo_.size()) memo_.resize(id + 1, kUnset);
    if (memo_[id] == kUnset) ++memo_size_;
    memo_[id] = stack_.back();
    return true;
  }
  [[gnu::always_inline]] bool Recall(size_t at, uint64_t id) {
    if (id >= memo_.size() || memo_[id] == kUnset)
      return Fail(at, fmt::format("memo id {} was never stored", id));
    return Push(memo_[id]);
  }
  bool Tuple(size_t at, size_t n) {
    if (stack_.size() < n + Floor())
      return Fail(at, "tuple needs more values than the stack holds");
    NodeId t = doc_.AddContainer(Kind::kTuple);
    doc_.Extend(t, std::span<const NodeId>(stack_.data() + stack_.size() - n, n));
    stack_.resize(stack_.size() - n);
    return Push(t);
  }
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }

  [[gnu::always_inline]] inline bool Step(size_t at, uint8_t op);

  static constexpr NodeId kUnset = 0xffffffffu;
  std::string_view data_;
  size_t pos_ = 0;
  bool stopped_ = false;
  bool seen_proto_ = false;
  Document& doc_;
  std::vector<NodeId> stack_;
  std::vector<size_t> marks_;
  std::vector<NodeId> memo_;
  size_t memo_size_ = 0;  // ids stored; MEMOIZE uses the next one
  std::vector<NodeId> items_;
  Status error_;
};

inline bool Vm::Step(size_t at, uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      const char* p;
      if (!Take(1, &p)) return Truncated(at, op);
      int proto = static_cast<uint8_t>(*p);
      if (at != 0 || seen_proto_) return Fail(at, "PROTO not at the start");
      if (proto < 2 || proto > 5)
        return Fail(at, fmt::format("pickle protocol {} (dumps use 2)", proto));
      seen_proto_ = true;
      return true;
    }
    case 0x95: {  // FRAME (protocol 4 framing: only a length hint)
      uint64_t n;
      if (!TakeLe(&n)) return Truncated(at, op);
      return true;
    }
    case '.':  // STOP
      stopped_ = true;
      return true;
    case '(':  // MARK
      marks_.push_back(stack_.size());
      return true;
    case '}':  // EMPTY_DICT
      return Push(doc_.AddContainer(Kind::kDict));
    case ']':  // EMPTY_LIST
      return Push(doc_.AddContainer(Kind::kList));
    case ')':  // EMPTY_TUPLE
      return Push(doc_.AddContainer(Kind::kTuple));
    case 'u':    // SETITEMS
    case 'e': {  // APPENDS
      if (marks_.empty()) return Fail(at, "no MARK to close");
      size_t m = marks_.back();
      marks_.pop_back();
      if (m == 0) return Fail(at, "no container below MARK");
      NodeId c = stack_[m - 1];
      Kind want = op == 'u' ? Kind::kDict : Kind::kList;
      if (doc_.kind(c) != want)
        return Fail(at, fmt::format("{} on a {}", op == 'u' ? "SETITEMS" : "APPENDS",
                                    KindName(doc_.kind(c))));
      size_t n = stack_.size() - m;
      if (op == 'u' && n % 2 != 0) return Fail(at, "SETITEMS with an odd number of values");
      doc_.Extend(c, std::span<const NodeId>(stack_.data() + m, n));
      stack_.resize(m);
      return true;
    }
    case 's':    // SETITEM
    case 'a': {  // APPEND
      size_t n = op == 's' ? 2 : 1;
      if (stack_.size() < n + 1 + Floor())
        return Fail(at, "SETITEM/APPEND needs more values than the stack holds");
      NodeId c = stack_[stack_.size() - n - 1];
      Kind want = op == 's' ? Kind::kDict : Kind::kList;
      if (doc_.kind(c) != want)
        return Fail(at, fmt::format("{} on a {}", op == 's' ? "SETITEM" : "APPEND",
                                    KindName(doc_.kind(c))));
      doc_.Extend(c, std::span<const NodeId>(stack_.data() + stack_.size() - n, n));
      stack_.resize(stack_.size() - n);
      return true;
    }
    case 't': {  // TUPLE
      NodeId unused;
      if (!PopMark(at, &items_, &unused, false)) return false;
      NodeId t = doc_.AddContainer(Kind::kTuple);
      doc_.Extend(t, items_);
      return Push(t);
    }
    case 0x85:
      return Tuple(at, 1);
    case 0x86:
      return Tuple(at, 2);
    case 0x87:
      return Tuple(at, 3);
    case 'X': {  // BINUNICODE
      uint32_t n;
      if (!TakeLe(&n)) return Truncated(at, op);
      return PushString(at, op, n);
    }
    case 0x8c: {  // SHORT_BINUNICODE
      uint8_t n;
      if (!TakeLe(&n)) return Truncated(at, op);
      return PushString(at, op, n);
    }
    case 0x8d: {  // BINUNICODE8
      uint64_t n;
      if (!TakeLe(&n)) return Truncated(at, op);
      return PushString(at, op, n);
    }
    case 'K': {  // BININT1
      uint8_t v;
      if (!TakeLe(&v)) return Truncated(at, op);
      return Push(doc_.AddScalar(Kind::kInt, v));
    }
    case 'M': {  // BININT2
      uint16_t v;
      if (!TakeLe(&v)) return Truncated(at, op);
      return Push(doc_.AddScalar(Kind::kInt, v));
    }
    case 'J': {  // BININT
      int32_t v;
      if (!TakeLe(&v)) return Truncated(at, op);
      return Push(doc_.AddScalar(Kind::kInt, static_cast<uint64_t>(static_cast<int64_t>(v))));
    }
    case 0x8a: {  // LONG1: n-byte little-endian two's complement
      uint8_t n;
      const char* p;
      if (!TakeLe(&n) || !Take(n, &p)) return Truncated(at, op);
      if (n > 8) return Fail(at, fmt::format("integer of {} bytes does not fit in 64 bits", n));
      uint64_t v = 0;
      for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
      if (n > 0 && n < 8 && (static_cast<uint8_t>(p[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
      return Push(doc_.AddScalar(Kind::kInt, v));
    }
    case 'G': {  // BINFLOAT: big-endian IEEE-754 double
      const char* p;
      if (!Take(8, &p)) return Truncated(at, op);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(p[i]);
      return Push(doc_.AddScalar(Kind::kFloat, bits));
    }
    case 0x88:
      return Push(doc_.AddScalar(Kind::kBool, 1));  // NEWTRUE
    case 0x89:
      return Push(doc_.AddScalar(Kind::kBool, 0));  // NEWFALSE
    case 'N':
      return Push(doc_.AddScalar(Kind::kNone, 0));  // NONE
    case 'q': {                                     // BINPUT
      uint8_t id;
      if (!TakeLe(&id)) return Truncated(at, op);
      return Memo(at, id);
    }
    case 'r': {  // LONG_BINPUT
      uint32_t id;
      if (!TakeLe(&id)) return Truncated(at, op);
      return Memo(at, id);
    }
    case 0x94:  // MEMOIZE
      return Memo(at, memo_size_);
    case 'h': {  // BINGET
      uint8_t id;
      if (!TakeLe(&id)) return Truncated(at, op);
      return Recall(at, id);
    }
    case 'j': {  // LONG_BINGET
      uint32_t id;
      if (!TakeLe(&id)) return Truncated(at, op);
      return Recall(at, id);
    }
    default:
      return Fail(
          at,
          fmt::format("opcode 0x{:02x} ({}) is not allowed: a flight-recorder dump holds data only",
                      op, OpcodeName(op)));
  }
}

}  // namespace

Status ParsePickleInto(std::string_view data, Document* doc) { return Vm(data, doc).Run(); }

Result<Document> ParsePickle(std::string_view data) {
  Document doc;
  Status s = ParsePickleInto(data, &doc);
  if (!s.ok()) return s;
  return doc;
}

}  // namespace ek::flightrec
