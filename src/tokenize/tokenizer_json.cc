// The tokenizer.json loader: Hugging Face's format, read through the one reader
// of the document (tokjson/document.h), to a Tokenizer, refusing anything
// tokenizer.h does not list as supported, each error naming the file and the
// JSON location. Encoding is tokenizer.cc; the SentencePiece-style family's
// parts are loaded by sentencepiece_json.cc.
#include <fmt/core.h>
#include <simdjson.h>

#include <cstring>

#include "core/file.h"
#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_internal.h"
#include "tokenize/unicode.h"
#include "tokjson/byte_level.h"
#include "tokjson/document.h"

namespace ek::tokenize {

using simdjson::dom::element;
using tokjson::TypeOf;

Status ReadModelOptions(const tokjson::Document& doc, bool* ignore_merges) {
  element model = doc.model();
  element v;
  if (model["dropout"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    double d = 0;
    if (v.get(d) != simdjson::SUCCESS || d != 0.0)
      return doc.Unsupported("model.dropout", "BPE dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string_view sv;
    if (model[key].get(v) == simdjson::SUCCESS && !v.is_null() &&
        (v.get(sv) != simdjson::SUCCESS || !sv.empty())) {
      return doc.Unsupported(std::string("model.") + key, "a non-empty affix");
    }
  }
  *ignore_merges = false;
  if (model["ignore_merges"].get(v) == simdjson::SUCCESS && !v.is_null()) {
    if (v.get(*ignore_merges) != simdjson::SUCCESS)
      return doc.Error("model.ignore_merges", "not a bool");
  }
  return Status::Ok();
}

Status LoadSplitStep(std::string_view name, element e, const std::string& where,
                     Tokenizer::PreStep* step) {
  auto Err = [name](const std::string& w, std::string_view what) {
    return tokjson::FieldError(name, w, what);
  };
  element pat;
  if (e["pattern"].get(pat) != simdjson::SUCCESS || !pat.is_object())
    return Err(where + ".pattern", "missing");
  std::string_view s;
  if (pat["Regex"].get(s) == simdjson::SUCCESS) {
    auto compiled = CompileRegex(s);
    if (!compiled.ok())
      return compiled.status().WithContext(fmt::format("{}: {}.pattern", name, where));
    step->pattern = std::move(compiled).value();
  } else if (pat["String"].get(s) == simdjson::SUCCESS) {
    step->pattern = MakeLiteralPattern(std::string(s));
  } else {
    return Err(where + ".pattern", "neither Regex nor String");
  }
  std::string_view behavior;
  if (e["behavior"].get(behavior) != simdjson::SUCCESS) return Err(where + ".behavior", "missing");
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
    return tokjson::UnsupportedField(name, where + ".behavior", std::string(behavior));
  element inv;
  if (e["invert"].get(inv) == simdjson::SUCCESS && !inv.is_null()) {
    if (inv.get(step->invert) != simdjson::SUCCESS) return Err(where + ".invert", "not a bool");
  }
  return Status::Ok();
}

class TokenizerLoader {
 public:
  TokenizerLoader(Tokenizer* t, std::string_view name) : t_(t), name_(name) {}

  Status Load(std::string_view json, size_t readable) {
    EK_ASSIGN_OR_RETURN(tokjson::Document doc, tokjson::Document::Parse(json, name_, readable));
    element trunc;
    if (doc.root()["truncation"].get(trunc) == simdjson::SUCCESS && !trunc.is_null()) {
      return Unsupported("truncation", "is set; evenkeel encodes whole records (set it to null)");
    }
    if (doc.decoder == tokjson::Decoder::kPieces) return LoadPieces(t_, doc, name_);
    t_->join_with_space_ = doc.decoder == tokjson::Decoder::kNone;
    EK_RETURN_IF_ERROR(LoadModel(doc));
    EK_RETURN_IF_ERROR(LoadNormalizer(doc.root()));
    EK_RETURN_IF_ERROR(LoadPreTokenizer(doc.root()));
    FinishIds(doc);
    return Status::Ok();
  }

 private:
  Status Err(std::string_view where, std::string_view what) const {
    return tokjson::FieldError(name_, where, what);
  }
  Status Unsupported(std::string_view where, std::string_view what) const {
    return tokjson::UnsupportedField(name_, where, what);
  }

  // The model's options the encoder supports, its vocabulary and its merges.
  Status LoadModel(tokjson::Document& doc) {
    bool ignore_merges = false;
    EK_RETURN_IF_ERROR(ReadModelOptions(doc, &ignore_merges));
    // Decoding: byte-level entries decode to their bytes (the BPE model's),
    // the others to their own text; with no decoder, every id to its key.
    t_->decode_override_ = std::move(doc.vocab_other);
    if (t_->join_with_space_) {
      for (size_t i = 0; i < doc.vocab_key.size(); ++i) {
        if (doc.has_id[i])
          t_->raw_token_text_[static_cast<int32_t>(i)] = std::string(doc.vocab_key[i]);
      }
    }
    // The merges first: they are looked up by the keys as written, among the byte-level
    // ones, which the model then takes.
    EK_ASSIGN_OR_RETURN(auto pairs, tokjson::ReadMerges(doc));
    Status st = t_->bpe_.InitVocab(std::move(doc.vocab_bytes), std::move(doc.vocab_byte_level),
                                   ignore_merges);
    if (!st.ok()) return st.WithContext(name_);
    st = t_->bpe_.InitMerges(pairs);
    if (!st.ok()) return st.WithContext(name_);
    t_->vocab_size_ = doc.vocab_limit;
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
    if (!PreTokenizerSteps(p, &steps))
      return Err("pre_tokenizer", "Sequence without pretokenizers");
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
        EK_RETURN_IF_ERROR(LoadSplitStep(name_, e, where, step.get()));
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

  // The added tokens, with the ids the document assigned: their decodings,
  // and the two matchers (raw text; normalized text).
  void FinishIds(tokjson::Document& doc) {
    t_->added_ = std::move(doc.added_tokens);
    t_->has_id_ = std::move(doc.has_id);
    std::vector<AddedToken> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    for (const AddedToken& a : t_->added_) {
      t_->decode_override_[a.id] = tokjson::ByteLevelDecode(a.content);
      if (t_->join_with_space_) t_->raw_token_text_[a.id] = a.content;
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
    t_->vocab_size_ = doc.id_limit;
  }

  Tokenizer* t_;
  std::string name_;
};

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view json, std::string_view name,
                                                       size_t readable) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  TokenizerLoader loader(t.get(), name);
  EK_RETURN_IF_ERROR(loader.Load(json, readable));
  t->FinishDecoding();
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::string& path) {
  EK_ASSIGN_OR_RETURN(MappedFile f, MappedFile::Open(path));
  return FromJson(f.data(), path, f.readable());
}

bool PreTokenizerSteps(simdjson::dom::element p,
                       std::vector<std::pair<simdjson::dom::element, std::string>>* steps) {
  if (tokjson::TypeOf(p) != "Sequence") {
    steps->emplace_back(p, "pre_tokenizer");
    return true;
  }
  simdjson::dom::array list;
  if (p["pretokenizers"].get(list) != simdjson::SUCCESS) return false;
  size_t i = 0;
  for (simdjson::dom::element e : list)
    steps->emplace_back(e, fmt::format("pre_tokenizer.pretokenizers[{}]", i++));
  return true;
}

}  // namespace ek::tokenize
