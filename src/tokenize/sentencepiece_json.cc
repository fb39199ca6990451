// The tokenizer.json loader's part for the SentencePiece-style family (the
// decoder is one of Replace, ByteFallback, Fuse, Strip, Metaspace or a
// Sequence of them: tokjson::Decoder::kPieces): the vocabulary as token texts,
// merges between them, the BPE's byte_fallback / unk_token / fuse_unk, the
// normalizers, the pre-tokenizer and the decoder, each read the way Hugging
// Face tokenizers deserializes it, anything else refused naming the field.
#include <fmt/core.h>
#include <simdjson.h>

#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_internal.h"
#include "tokenize/unicode.h"
#include "tokjson/document.h"

namespace ek::tokenize {

namespace {

using simdjson::dom::element;
using tokjson::TypeOf;

class PiecesLoader {
 public:
  PiecesLoader(Tokenizer::Pieces* p, const tokjson::Document& doc) : p_(p), doc_(doc) {}

  Status Err(const std::string& where, std::string_view what) const {
    return doc_.Error(where, what);
  }
  Status Unsupported(const std::string& where, std::string_view what) const {
    return doc_.Unsupported(where, what);
  }

  // BPE's options over characters; `vocab` the model (vocabulary loaded).
  Status ModelOptions(const BpeModel* vocab, bool ignore_merges) {
    element model = doc_.model();
    CharBpeOptions o;
    o.ignore_merges = ignore_merges;
    for (auto [key, out] :
         {std::pair{"byte_fallback", &o.byte_fallback}, std::pair{"fuse_unk", &o.fuse_unk}}) {
      element f;
      if (model[key].get(f) != simdjson::SUCCESS || f.is_null()) continue;
      if (f.get(*out) != simdjson::SUCCESS) return Err(std::string("model.") + key, "not a bool");
    }
    element unk;
    if (model["unk_token"].get(unk) == simdjson::SUCCESS && !unk.is_null()) {
      std::string_view u;
      if (unk.get(u) != simdjson::SUCCESS) return Err("model.unk_token", "not a string");
      o.unk_id = vocab->Find(u);
      // Hugging Face fails the encode that needs it (UnkTokenOutOfVocabulary).
      if (o.unk_id < 0)
        return Unsupported("model.unk_token", fmt::format("'{}' is not in model.vocab", u));
    }
    p_->model.Init(vocab, o);
    return Status::Ok();
  }

  Status Normalizer(element n, const std::string& where) {
    const std::string type = TypeOf(n);
    if (type == "Sequence") {
      simdjson::dom::array list;
      if (n["normalizers"].get(list) != simdjson::SUCCESS)
        return Err(where, "Sequence without normalizers");
      size_t i = 0;
      for (element e : list)
        EK_RETURN_IF_ERROR(Normalizer(e, fmt::format("{}.normalizers[{}]", where, i++)));
      return Status::Ok();
    }
    if (type == "NFC") {
      if (p_->normalizer.empty()) nfc_first_ = true;
      p_->normalizer.AddNfc();
      return Status::Ok();
    }
    if (type == "NFKC") {
      p_->normalizer.AddNfkc();
      return Status::Ok();
    }
    if (type == "Prepend") {
      std::string_view text;
      if (n["prepend"].get(text) != simdjson::SUCCESS) return Err(where + ".prepend", "missing");
      p_->normalizer.AddPrepend(std::string(text));
      return Status::Ok();
    }
    if (type == "Replace") {
      std::unique_ptr<Pattern> pattern;
      std::string content;
      EK_RETURN_IF_ERROR(Replacement(n, where, &pattern, &content));
      p_->normalizer.AddReplace(std::move(pattern), std::move(content));
      return Status::Ok();
    }
    return Unsupported(where, "normalizer '" + type +
                                  "' (supported: NFC, NFKC, Prepend, Replace, Sequence of these)");
  }

  // Replace's pattern ({"String": ...} or {"Regex": ...}) and content.
  Status Replacement(element n, const std::string& where, std::unique_ptr<Pattern>* pattern,
                     std::string* content) {
    element pat;
    if (n["pattern"].get(pat) != simdjson::SUCCESS || !pat.is_object())
      return Err(where + ".pattern", "missing");
    std::string_view s;
    if (pat["String"].get(s) == simdjson::SUCCESS) {
      if (s.empty()) return Unsupported(where + ".pattern", "an empty String");
      *pattern = MakeLiteralPattern(std::string(s));
    } else if (pat["Regex"].get(s) == simdjson::SUCCESS) {
      auto compiled = CompileRegex(s);
      if (!compiled.ok())
        return compiled.status().WithContext(fmt::format("{}: {}.pattern", doc_.name(), where));
      *pattern = std::move(compiled).value();
    } else {
      return Err(where + ".pattern", "neither Regex nor String");
    }
    std::string_view c;
    if (n["content"].get(c) != simdjson::SUCCESS) return Err(where + ".content", "missing");
    *content = std::string(c);
    return Status::Ok();
  }

  // Metaspace's fields, read as Hugging Face's MetaspaceHelper does.
  Status ReadMetaspace(element e, const std::string& where, Metaspace* m, uint32_t* cp) {
    std::string_view r;
    if (e["replacement"].get(r) != simdjson::SUCCESS) return Err(where + ".replacement", "missing");
    if (r.empty() || DecodeUtf8(reinterpret_cast<const unsigned char*>(r.data()), cp) != r.size())
      return Err(where + ".replacement", "not one character");
    m->replacement = std::string(r);
    element f;
    std::string_view scheme = "always";
    if (e["prepend_scheme"].get(f) == simdjson::SUCCESS && !f.is_null() &&
        f.get(scheme) != simdjson::SUCCESS)
      return Err(where + ".prepend_scheme", "not a string");
    if (scheme == "always") {
      m->prepend = Metaspace::kAlways;
    } else if (scheme == "first") {
      m->prepend = Metaspace::kFirst;
    } else if (scheme == "never") {
      m->prepend = Metaspace::kNever;
    } else {
      return Err(where + ".prepend_scheme", fmt::format("'{}' (always, first or never)", scheme));
    }
    if (e["add_prefix_space"].get(f) == simdjson::SUCCESS && !f.is_null()) {
      bool add = true;
      if (f.get(add) != simdjson::SUCCESS) return Err(where + ".add_prefix_space", "not a bool");
      if (!add) {
        if (m->prepend != Metaspace::kNever)
          return Err(where, "add_prefix_space does not match declared prepend_scheme");
        m->prepend = Metaspace::kNever;
      }
    }
    m->split = true;
    if (e["split"].get(f) == simdjson::SUCCESS && !f.is_null() && f.get(m->split))
      return Err(where + ".split", "not a bool");
    return Status::Ok();
  }

  Status PreTokenizer(element root) {
    element p;
    if (root["pre_tokenizer"].get(p) != simdjson::SUCCESS || p.is_null()) {
      p_->describe_pre = "none";
      return Status::Ok();
    }
    std::vector<std::pair<element, std::string>> steps;
    if (!PreTokenizerSteps(p, &steps))
      return Err("pre_tokenizer", "Sequence without pretokenizers");
    for (size_t i = 0; i < steps.size(); ++i) {
      auto& [e, where] = steps[i];
      const std::string type = TypeOf(e);
      if (!p_->describe_pre.empty()) p_->describe_pre += "+";
      if (type == "Metaspace") {
        if (i + 1 != steps.size())
          return Unsupported(where, "Metaspace before another pre-tokenizer");
        uint32_t cp;
        EK_RETURN_IF_ERROR(ReadMetaspace(e, where, &p_->metaspace, &cp));
        p_->has_metaspace = true;
        p_->describe_pre += "metaspace";
      } else if (type == "Split") {
        auto step = std::make_unique<Tokenizer::PreStep>();
        EK_RETURN_IF_ERROR(LoadSplitStep(doc_.name(), e, where, step.get()));
        p_->describe_pre += "split(" + std::string(step->pattern->kind()) + ")";
        p_->splits.push_back(std::move(step));
      } else {
        return Unsupported(where, "pre-tokenizer '" + type +
                                      "' with a SentencePiece-style decoder (supported: "
                                      "Metaspace, Split, Sequence of these)");
      }
    }
    if (p_->describe_pre.empty()) p_->describe_pre = "none";
    return Status::Ok();
  }

  Status Decoder(element d, const std::string& where) {
    const std::string type = TypeOf(d);
    if (type == "Sequence") {
      simdjson::dom::array list;
      if (d["decoders"].get(list) != simdjson::SUCCESS) return Err(where, "no decoders");
      size_t i = 0;
      for (element e : list)
        EK_RETURN_IF_ERROR(Decoder(e, fmt::format("{}.decoders[{}]", where, i++)));
      return Status::Ok();
    }
    if (type == "ByteFallback") {
      p_->decoder.AddByteFallback();
    } else if (type == "Fuse") {
      p_->decoder.AddFuse();
    } else if (type == "Replace") {
      std::unique_ptr<Pattern> pattern;
      std::string content;
      EK_RETURN_IF_ERROR(Replacement(d, where, &pattern, &content));
      p_->decoder.AddReplace(std::move(pattern), std::move(content));
    } else if (type == "Strip") {
      std::string_view c;
      uint32_t cp;
      if (d["content"].get(c) != simdjson::SUCCESS || c.empty() ||
          DecodeUtf8(reinterpret_cast<const unsigned char*>(c.data()), &cp) != c.size())
        return Err(where + ".content", "not one character");
      uint64_t start = 0, stop = 0;
      if (d["start"].get(start) != simdjson::SUCCESS) return Err(where + ".start", "not a count");
      if (d["stop"].get(stop) != simdjson::SUCCESS) return Err(where + ".stop", "not a count");
      p_->decoder.AddStrip(cp, static_cast<size_t>(start), static_cast<size_t>(stop));
    } else if (type == "Metaspace") {
      Metaspace m;
      uint32_t cp;
      EK_RETURN_IF_ERROR(ReadMetaspace(d, where, &m, &cp));
      p_->decoder.AddMetaspace(cp, m.prepend != Metaspace::kNever);
    } else {
      // Document::Parse accepted only these; kept for a reader that did not.
      return Unsupported(where, "decoder '" + type + "'");
    }
    return Status::Ok();
  }

  bool nfc_first() const { return nfc_first_; }

 private:
  Tokenizer::Pieces* p_;
  const tokjson::Document& doc_;
  bool nfc_first_ = false;
};

}  // namespace

Status LoadPieces(Tokenizer* t, const tokjson::Document& doc, const std::string& name) {
  t->pieces_ = std::make_unique<Tokenizer::Pieces>();
  PiecesLoader loader(t->pieces_.get(), doc);
  bool ignore_merges = false;
  EK_RETURN_IF_ERROR(ReadModelOptions(doc, &ignore_merges));
  // The vocabulary as token texts ("▁the", "<0x0A>"); merges between texts.
  std::vector<std::string> texts(static_cast<size_t>(doc.vocab_limit));
  for (size_t i = 0; i < texts.size(); ++i) {
    if (doc.in_vocab[i]) texts[i] = std::string(doc.vocab_key[i]);
  }
  Status st = t->bpe_.InitVocab(std::move(texts), doc.in_vocab, ignore_merges,
                                /*byte_level=*/false);
  if (!st.ok()) return st.WithContext(name);
  EK_ASSIGN_OR_RETURN(auto pairs, tokjson::ReadMerges(doc, /*byte_level=*/false));
  st = t->bpe_.InitMerges(pairs);
  if (!st.ok()) return st.WithContext(name);
  EK_RETURN_IF_ERROR(loader.ModelOptions(&t->bpe_, ignore_merges));

  element n;
  if (doc.root()["normalizer"].get(n) == simdjson::SUCCESS && !n.is_null())
    EK_RETURN_IF_ERROR(loader.Normalizer(n, "normalizer"));
  t->nfc_ = loader.nfc_first();
  EK_RETURN_IF_ERROR(loader.PreTokenizer(doc.root()));
  element d;
  if (doc.root()["decoder"].get(d) != simdjson::SUCCESS)
    return doc.Error("decoder", "missing");  // Parse saw it
  EK_RETURN_IF_ERROR(loader.Decoder(d, "decoder"));

  // Added tokens: a normalized one is found in normalized text as its content
  // normalized the same way, and decodes from that form too (Hugging Face
  // 0.23's normalized_cache, which simple_id_to_token reads); any other
  // decodes from its content.
  t->added_ = doc.added_tokens;
  t->has_id_ = doc.has_id;
  std::vector<AddedToken> raw, norm;
  std::vector<std::string> raw_pat, norm_pat;
  std::string tmp, out;
  for (const AddedToken& a : t->added_) {
    t->decode_override_[a.id] = a.content;
    if (a.normalized) {
      t->pieces_->normalizer.Apply(a.content, &out, nullptr, &tmp, nullptr);
      t->decode_override_[a.id] = out;
      norm.push_back(a);
      norm_pat.push_back(out);
    } else {
      raw.push_back(a);
      raw_pat.push_back(a.content);
    }
  }
  t->raw_matcher_.Build(std::move(raw), std::move(raw_pat));
  t->normalized_matcher_.Build(std::move(norm), std::move(norm_pat));
  t->vocab_size_ = doc.id_limit;
  return Status::Ok();
}

}  // namespace ek::tokenize
