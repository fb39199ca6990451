// The tokenizer.json loader: Hugging Face's format to a Tokenizer, refusing
// anything tokenizer.h does not list as supported, each error naming the file and
// the JSON location. Encoding is tokenizer.cc.
#include <fmt/core.h>
#include <simdjson.h>

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "core/byte_level.h"
#include "core/file.h"
#include "core/json_check.h"
#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_internal.h"
#include "tokenize/unicode.h"

namespace ek::tokenize {

// ---------------------------------------------------------------------------
// Loading.

namespace {

// HF ByteLevel decoder: a token whose chars all map gives those bytes, any
// other token gives its own UTF-8.
std::string DecodeByteLevelToken(std::string_view s) {
  std::string out;
  if (ByteLevelToBytes(s, &out)) return out;
  return std::string(s);
}

using simdjson::dom::element;

std::string TypeOf(element e) {
  if (!e.is_object()) return "";
  std::string_view t;
  if (e["type"].get(t) != simdjson::SUCCESS) return "";
  return std::string(t);
}

}  // namespace

class TokenizerLoader {
 public:
  TokenizerLoader(Tokenizer* t, std::string_view name) : t_(t), name_(name) {}

  Status Load(std::string_view json) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(json);
    element root;
    if (auto err = parser.parse(padded).get(root); err) {
      std::string where = LocateJsonError(json);
      if (where.empty()) where = simdjson::error_message(err);
      return Err("", "malformed JSON: " + where);
    }
    if (!root.is_object()) return Err("", "not a tokenizer.json: the top level is not an object");
    element model;
    if (root["model"].get(model) != simdjson::SUCCESS || !model.is_object()) {
      return Err("model", "missing: not a tokenizer.json");
    }
    element trunc;
    if (root["truncation"].get(trunc) == simdjson::SUCCESS && !trunc.is_null()) {
      return Unsupported("truncation", "is set; evenkeel encodes whole records (set it to null)");
    }
    EK_RETURN_IF_ERROR(LoadDecoder(root));
    EK_RETURN_IF_ERROR(LoadModel(model));
    EK_RETURN_IF_ERROR(LoadAddedTokens(root));
    EK_RETURN_IF_ERROR(LoadNormalizer(root));
    EK_RETURN_IF_ERROR(LoadPreTokenizer(root));
    return FinishIds();
  }

 private:
  Status Err(std::string_view where, std::string what) const {
    if (where.empty()) return InvalidArgumentError(fmt::format("{}: {}", name_, what));
    return InvalidArgumentError(fmt::format("{}: {}: {}", name_, where, what));
  }
  Status Unsupported(std::string_view where, std::string what) const {
    return UnsupportedError(fmt::format("{}: {}: unsupported: {}", name_, where, what));
  }

  Status LoadModel(element model) {
    std::string type = TypeOf(model);
    if (!type.empty() && type != "BPE") {
      return Unsupported("model.type", "'" + type + "' (only byte-level BPE is supported)");
    }
    element v;
    if (model["dropout"].get(v) == simdjson::SUCCESS && !v.is_null()) {
      double d = 0;
      if (v.get(d) != simdjson::SUCCESS || d != 0.0)
        return Unsupported("model.dropout", "BPE dropout");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      std::string_view sv;
      if (model[key].get(v) == simdjson::SUCCESS && !v.is_null() &&
          (v.get(sv) != simdjson::SUCCESS || !sv.empty())) {
        return Unsupported(std::string("model.") + key, "a non-empty affix");
      }
    }
    bool ignore_merges = false;
    if (model["ignore_merges"].get(v) == simdjson::SUCCESS && !v.is_null()) {
      if (v.get(ignore_merges) != simdjson::SUCCESS)
        return Err("model.ignore_merges", "not a bool");
    }
    simdjson::dom::object vocab;
    if (model["vocab"].get(vocab) != simdjson::SUCCESS)
      return Err("model.vocab", "missing or not an object");
    // Ids first, to size the tables.
    int64_t max_id = -1, count = 0;
    for (auto field : vocab) {
      int64_t id;
      if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 30)) {
        return Err(fmt::format("model.vocab[{}]", JsonKey(field.key)),
                   "id is not a non-negative integer");
      }
      max_id = std::max(max_id, id);
      ++count;
    }
    // The tables are indexed by id, so their size must follow the file's: real
    // vocabularies are dense (0..n-1). One stray id near 2^30 in a 5 KB file
    // asked for 32 GB (fuzz_tokenizer); a few holes are fine.
    if (max_id >= 2 * count + 65536) {
      return Err("model.vocab", fmt::format("ids are too sparse: the largest is {} for {} entries",
                                            max_id, count));
    }
    size_t n = static_cast<size_t>(max_id + 1);
    std::vector<std::string> tokens(n);
    std::vector<bool> present(n, false);
    t_->has_id_.assign(n, false);
    for (auto field : vocab) {
      size_t i = static_cast<size_t>(field.value.get_int64().value_unsafe());
      t_->has_id_[i] = true;
      if (ByteLevelToBytes(field.key, &tokens[i])) {
        present[i] = true;
      } else {
        // Not reachable by byte-level BPE; decoded as HF's ByteLevel decoder does.
        if (!simdjson::validate_utf8(field.key.data(), field.key.size())) {
          return Err("model.vocab", fmt::format("key for id {} is not valid UTF-8", i));
        }
        t_->decode_override_[static_cast<int32_t>(i)] = std::string(field.key);
        tokens[i].clear();
      }
      if (t_->join_with_space_)
        t_->raw_token_text_[static_cast<int32_t>(i)] = std::string(field.key);
    }
    {
      // Hugging Face's model.get_vocab_size() is the vocabulary map's length: every
      // distinct key, byte-level or not; added tokens' ids are assigned after it.
      std::unordered_set<std::string_view> keys;
      keys.reserve(n);
      for (auto field : vocab) keys.insert(field.key);
      model_vocab_len_ = static_cast<int64_t>(keys.size());
    }
    Status st = t_->bpe_.InitVocab(std::move(tokens), std::move(present), ignore_merges);
    if (!st.ok()) return st.WithContext(name_);
    // Merges: "a b" strings or ["a", "b"] pairs, resolved through the raw-byte vocabulary.
    simdjson::dom::array merges;
    if (model["merges"].get(merges) != simdjson::SUCCESS)
      return Err("model.merges", "missing or not an array");
    std::vector<std::pair<int32_t, int32_t>> pairs;
    pairs.reserve(merges.size());
    size_t idx = 0;
    std::string ab, bb;
    for (element m : merges) {
      std::string_view a, b;
      if (m.is_string()) {
        std::string_view s = m.get_string().value_unsafe();
        size_t sp = s.find(' ');
        if (sp == std::string_view::npos)
          return Err(fmt::format("model.merges[{}]", idx), "no space in merge");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array()) {
        simdjson::dom::array pair = m.get_array().value_unsafe();
        if (pair.size() != 2 || pair.at(0).get(a) != simdjson::SUCCESS ||
            pair.at(1).get(b) != simdjson::SUCCESS) {
          return Err(fmt::format("model.merges[{}]", idx), "not a pair of strings");
        }
      } else {
        return Err(fmt::format("model.merges[{}]", idx), "not a string or a pair");
      }
      int32_t ia = ByteLevelToBytes(a, &ab) ? t_->bpe_.Find(ab) : -1;
      int32_t ib = ByteLevelToBytes(b, &bb) ? t_->bpe_.Find(bb) : -1;
      if (ia < 0 || ib < 0) {
        return Err(fmt::format("model.merges[{}]", idx),
                   fmt::format("token '{}' is not a byte-level token in model.vocab",
                               ia < 0 ? std::string(a) : std::string(b)));
      }
      pairs.emplace_back(ia, ib);
      ++idx;
    }
    st = t_->bpe_.InitMerges(pairs);
    if (!st.ok()) return st.WithContext(name_);
    t_->vocab_size_ = static_cast<int32_t>(n);
    return Status::Ok();
  }

  Status LoadAddedTokens(element root) {
    element v;
    if (root["added_tokens"].get(v) != simdjson::SUCCESS || v.is_null()) return Status::Ok();
    simdjson::dom::array arr;
    if (v.get(arr) != simdjson::SUCCESS) return Err("added_tokens", "not an array");
    size_t i = 0;
    for (element e : arr) {
      std::string where = fmt::format("added_tokens[{}]", i++);
      AddedToken t;
      int64_t id;
      std::string_view content;
      if (e["id"].get(id) != simdjson::SUCCESS || id < 0 || id > (1 << 30))
        return Err(where, "bad id");
      if (e["content"].get(content) != simdjson::SUCCESS) return Err(where, "bad content");
      t.id = static_cast<int32_t>(id);
      t.content = std::string(content);
      auto flag = [&](const char* key, bool* out) -> Status {
        element f;
        if (e[key].get(f) != simdjson::SUCCESS || f.is_null()) return Status::Ok();
        if (f.get(*out) != simdjson::SUCCESS) return Err(where + "." + key, "not a bool");
        return Status::Ok();
      };
      EK_RETURN_IF_ERROR(flag("special", &t.special));
      EK_RETURN_IF_ERROR(flag("single_word", &t.single_word));
      EK_RETURN_IF_ERROR(flag("lstrip", &t.lstrip));
      EK_RETURN_IF_ERROR(flag("rstrip", &t.rstrip));
      EK_RETURN_IF_ERROR(flag("normalized", &t.normalized));
      t_->added_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  Status LoadNormalizer(element root) {
    element n;
    if (root["normalizer"].get(n) != simdjson::SUCCESS || n.is_null()) return Status::Ok();
    return NormalizerNode(n, "normalizer");
  }

  Status NormalizerNode(element n, const std::string& where) {
    std::string type = TypeOf(n);
    if (type == "NFC") {
      t_->nfc_ = true;
      return Status::Ok();
    }
    if (type == "Sequence") {
      simdjson::dom::array list;
      if (n["normalizers"].get(list) != simdjson::SUCCESS)
        return Err(where, "Sequence without normalizers");
      size_t i = 0;
      for (element e : list)
        EK_RETURN_IF_ERROR(NormalizerNode(e, fmt::format("{}.normalizers[{}]", where, i++)));
      return Status::Ok();
    }
    return Unsupported(where, "normalizer '" + type + "' (supported: NFC, Sequence of NFC)");
  }

  Status LoadPreTokenizer(element root) {
    element p;
    if (root["pre_tokenizer"].get(p) != simdjson::SUCCESS || p.is_null()) {
      return Unsupported("pre_tokenizer", "none: not a byte-level tokenizer");
    }
    std::vector<std::pair<element, std::string>> steps;
    if (TypeOf(p) == "Sequence") {
      simdjson::dom::array list;
      if (p["pretokenizers"].get(list) != simdjson::SUCCESS)
        return Err("pre_tokenizer", "Sequence without pretokenizers");
      size_t i = 0;
      for (element e : list)
        steps.emplace_back(e, fmt::format("pre_tokenizer.pretokenizers[{}]", i++));
    } else {
      steps.emplace_back(p, "pre_tokenizer");
    }
    bool saw_byte_level = false;
    for (size_t i = 0; i < steps.size(); ++i) {
      auto& [e, where] = steps[i];
      std::string type = TypeOf(e);
      auto step = std::make_unique<Tokenizer::PreStep>();
      if (type == "ByteLevel") {
        if (i + 1 != steps.size())
          return Unsupported(where, "ByteLevel before another pre-tokenizer");
        saw_byte_level = true;
        step->kind = Tokenizer::PreStep::kByteLevel;
        bool use_regex = true;
        element f;
        if (e["add_prefix_space"].get(f) == simdjson::SUCCESS && !f.is_null()) {
          if (f.get(step->add_prefix_space) != simdjson::SUCCESS)
            return Err(where + ".add_prefix_space", "not a bool");
        }
        if (e["use_regex"].get(f) == simdjson::SUCCESS && !f.is_null()) {
          if (f.get(use_regex) != simdjson::SUCCESS) return Err(where + ".use_regex", "not a bool");
        }
        if (use_regex) {
          EK_ASSIGN_OR_RETURN(step->pattern, CompileRegex(kGpt2Regex));
        }
        if (!use_regex && !step->add_prefix_space) continue;  // identity on pieces
      } else if (type == "Split") {
        EK_RETURN_IF_ERROR(LoadSplit(e, where, step.get()));
      } else {
        return Unsupported(where,
                           "pre-tokenizer '" + type + "' (supported: ByteLevel, Split, Sequence)");
      }
      t_->steps_.push_back(std::move(step));
    }
    if (!saw_byte_level)
      return Unsupported("pre_tokenizer", "no ByteLevel step: not a byte-level tokenizer");
    return Status::Ok();
  }

  Status LoadSplit(element e, const std::string& where, Tokenizer::PreStep* step) {
    element pat;
    if (e["pattern"].get(pat) != simdjson::SUCCESS || !pat.is_object())
      return Err(where + ".pattern", "missing");
    std::string_view s;
    if (pat["Regex"].get(s) == simdjson::SUCCESS) {
      auto compiled = CompileRegex(s);
      if (!compiled.ok())
        return compiled.status().WithContext(fmt::format("{}: {}.pattern", name_, where));
      step->pattern = std::move(compiled).value();
    } else if (pat["String"].get(s) == simdjson::SUCCESS) {
      step->pattern = MakeLiteralPattern(std::string(s));
    } else {
      return Err(where + ".pattern", "neither Regex nor String");
    }
    std::string_view behavior;
    if (e["behavior"].get(behavior) != simdjson::SUCCESS)
      return Err(where + ".behavior", "missing");
    if (behavior == "Isolated")
      step->behavior = SplitBehavior::kIsolated;
    else if (behavior == "Removed")
      step->behavior = SplitBehavior::kRemoved;
    else if (behavior == "MergedWithPrevious")
      step->behavior = SplitBehavior::kMergedWithPrevious;
    else if (behavior == "MergedWithNext")
      step->behavior = SplitBehavior::kMergedWithNext;
    else if (behavior == "Contiguous")
      step->behavior = SplitBehavior::kContiguous;
    else
      return Unsupported(where + ".behavior", std::string(behavior));
    element inv;
    if (e["invert"].get(inv) == simdjson::SUCCESS && !inv.is_null()) {
      if (inv.get(step->invert) != simdjson::SUCCESS) return Err(where + ".invert", "not a bool");
    }
    return Status::Ok();
  }

  Status LoadDecoder(element root) {
    element d;
    if (root["decoder"].get(d) != simdjson::SUCCESS || d.is_null()) {
      t_->join_with_space_ = true;
      return Status::Ok();
    }
    std::string type = TypeOf(d);
    if (type != "ByteLevel") return Unsupported("decoder", "'" + type + "' (supported: ByteLevel)");
    return Status::Ok();
  }

  // Ids as Hugging Face assigns them when it loads added_tokens
  // (AddedVocabulary::add_tokens, in file order): content already added keeps
  // its id (later flags win); content that is a model vocabulary entry takes
  // that entry's id; anything else takes max(added ids) + 1, or the model's
  // vocabulary size when no added id reaches it. The JSON "id" is only a
  // hint there (HF warns when they differ); real files agree with this.
  Status AssignAddedIds() {
    const int64_t model_size = model_vocab_len_;
    std::unordered_map<std::string, int32_t> non_byte_level_keys;
    for (const auto& [id, key] : t_->decode_override_) non_byte_level_keys.emplace(key, id);
    std::vector<AddedToken> out;
    std::unordered_map<std::string, size_t> by_content;
    int64_t max_added = -1;
    std::string bytes;
    for (AddedToken a : t_->added_) {
      if (a.content.empty()) continue;
      if (auto it = by_content.find(a.content); it != by_content.end()) {
        a.id = out[it->second].id;
        out[it->second] = a;
        continue;
      }
      int32_t model_id = -1;
      if (ByteLevelToBytes(a.content, &bytes)) {
        model_id = t_->bpe_.Find(bytes);
      } else if (auto k = non_byte_level_keys.find(a.content); k != non_byte_level_keys.end()) {
        model_id = k->second;
      }
      if (model_id >= 0) {
        a.id = model_id;
      } else if (max_added < 0 || (max_added < model_size && model_size != 0)) {
        a.id = static_cast<int32_t>(model_size);
      } else {
        a.id = static_cast<int32_t>(max_added + 1);
      }
      max_added = std::max<int64_t>(max_added, a.id);
      by_content.emplace(a.content, out.size());
      out.push_back(std::move(a));
    }
    t_->added_ = std::move(out);
    return Status::Ok();
  }

  Status FinishIds() {
    EK_RETURN_IF_ERROR(AssignAddedIds());
    int32_t limit = t_->vocab_size_;
    for (const AddedToken& a : t_->added_) limit = std::max(limit, a.id + 1);
    size_t n = static_cast<size_t>(limit);
    t_->has_id_.resize(n, false);
    std::vector<AddedToken> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    for (const AddedToken& a : t_->added_) {
      t_->decode_override_[a.id] = DecodeByteLevelToken(a.content);
      if (t_->join_with_space_) t_->raw_token_text_[a.id] = a.content;
      t_->has_id_[static_cast<size_t>(a.id)] = true;
      if (a.normalized) {
        std::string p;
        if (t_->nfc_) {
          AppendNfc(a.content, &p);
        } else {
          p = a.content;
        }
        norm.push_back(a);
        norm_pat.push_back(std::move(p));
      } else {
        raw.push_back(a);
        raw_pat.push_back(a.content);
      }
    }
    t_->raw_matcher_.Build(std::move(raw), std::move(raw_pat));
    t_->normalized_matcher_.Build(std::move(norm), std::move(norm_pat));
    t_->vocab_size_ = limit;
    return Status::Ok();
  }

  static std::string JsonKey(std::string_view k) { return std::string(k.substr(0, 40)); }

  Tokenizer* t_;
  std::string name_;
  int64_t model_vocab_len_ = 0;
};

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json,
                                                       std::string_view name) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  TokenizerLoader loader(t.get(), name);
  EK_RETURN_IF_ERROR(loader.Load(json));
  t->token_len_.resize(static_cast<size_t>(t->vocab_size_));
  for (int32_t id = 0; id < t->vocab_size_; ++id)
    t->token_len_[static_cast<size_t>(id)] = static_cast<uint32_t>(t->TokenLength(id));
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  return FromJson(f.data(), path);
}

}  // namespace ek::tokenize
