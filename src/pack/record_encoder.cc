#include "pack/record_encoder.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>

#include "core/file.h"
#include "pack/skip_list.h"
#include "tokenize/unicode.h"

namespace ek::pack {
namespace {

// NFC-normalizes a chat record's text piece by piece between span boundaries,
// moving the spans with it, so that token offsets (in normalized text) and
// spans agree for a tokenizer that normalizes to NFC.
void NormalizeWithSpans(RenderedRecord* r, std::string* scratch) {
  std::vector<size_t> cuts{0};
  for (auto [b, e] : r->spans) {
    cuts.push_back(b);
    cuts.push_back(e);
  }
  cuts.push_back(r->text.size());
  scratch->clear();
  std::vector<size_t> moved(cuts.size());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    moved[i] = scratch->size();
    tokenize::AppendNfc(std::string_view(r->text).substr(cuts[i], cuts[i + 1] - cuts[i]), scratch);
  }
  moved.back() = scratch->size();
  for (size_t k = 0; k < r->spans.size(); ++k) r->spans[k] = {moved[1 + 2 * k], moved[2 + 2 * k]};
  r->text.swap(*scratch);
}

}  // namespace

void MaskFromSpans(const std::vector<uint32_t>& ends,
                   const std::vector<std::pair<size_t, size_t>>& spans,
                   std::vector<uint8_t>* mask) {
  size_t sp = 0, start = 0;
  for (uint32_t end : ends) {
    while (sp < spans.size() && spans[sp].second <= start) ++sp;
    bool on = sp < spans.size() && spans[sp].first < end && spans[sp].second > start && end > start;
    mask->push_back(on ? 1 : 0);
    start = end;
  }
}

Result<std::unique_ptr<RecordEncoder>> RecordEncoder::Create(const PackOptions& opt,
                                                             const std::vector<PackSource>& sources,
                                                             const tokenize::Tokenizer* tok,
                                                             int32_t eos_id, bool masks,
                                                             Manifest* m) {
  // The chat template: the model's own (auto), a .jinja file, or a fixed layout.
  RecordOptions rec = opt.record;
  rec.chat = opt.chat.mode;
  rec.spans = masks;
  m->chat_template = std::string(ChatModeName(opt.chat.mode));
  const std::string config = ConfigBeside(opt.tokenizer_path);
  if (opt.chat.mode == ChatMode::kJinja) {
    EK_ASSIGN_OR_RETURN(
        tmpl::ChatTemplate t,
        tmpl::ChatTemplate::FromFile(opt.chat.file, FileExists(config) ? config : std::string()));
    m->chat_template_path = opt.chat.file;
    rec.jinja = std::make_shared<const tmpl::ChatTemplate>(std::move(t));
  } else if (opt.chat.mode == ChatMode::kAuto) {
    m->chat_template = "none";
    if (!FileExists(config)) {
      rec.no_template = fmt::format(
          "record has \"messages\" but there is no chat template: {} does not exist; pass "
          "--chat-template "
          "FILE.jinja, chatml or llama3",
          config);
    } else if (auto t = tmpl::ChatTemplate::FromTokenizerConfig(config); !t.ok()) {
      rec.no_template = fmt::format(
          "record has \"messages\" but the chat template of {} cannot be used ({}); pass "
          "--chat-template "
          "FILE.jinja, chatml or llama3",
          config, t.status().message());
    } else {
      m->chat_template = "jinja";
      m->chat_template_path = config;
      rec.jinja = std::make_shared<const tmpl::ChatTemplate>(std::move(*t));
    }
  }
  if (rec.jinja)
    m->chat_template_xxh3 = XXH3_64bits(rec.jinja->source().data(), rec.jinja->source().size());

  auto enc = std::unique_ptr<RecordEncoder>(new RecordEncoder(tok, eos_id, masks, opt.threads));
  enc->source_rec_.assign(sources.size(), rec);
  for (size_t s = 0; s < sources.size(); ++s) {
    enc->source_rec_[s].shape = sources[s].shape;
    if (!sources[s].text_field.empty()) enc->source_rec_[s].text_field = sources[s].text_field;
  }
  const size_t workers = enc->pool_.size();
  enc->renderers_.resize(sources.size());
  enc->scratch_.resize(workers);
  for (size_t s = 0; s < sources.size(); ++s) {
    for (size_t i = 0; i < workers; ++i)
      enc->renderers_[s].push_back(std::make_unique<RecordRenderer>(enc->source_rec_[s]));
  }
  return enc;
}

void TaskOut::Reset() {
  std::vector<int32_t> kept_ids = std::move(ids);
  std::vector<uint8_t> kept_mask = std::move(mask);
  std::vector<uint64_t> kept_offsets = std::move(offsets);
  *this = TaskOut();
  ids = std::move(kept_ids);
  mask = std::move(kept_mask);
  offsets = std::move(kept_offsets);
  ids.clear();
  mask.clear();
  offsets.clear();
}

size_t RecordEncoder::Run(const std::vector<RecRef>& refs, size_t source, bool screen,
                          std::vector<TaskOut>* outs) {
  const size_t tasks = std::min<size_t>(refs.size(), pool_.size() * 8);
  outs->resize(tasks);
  for (TaskOut& out : *outs) out.Reset();
  pool_.ParallelFor(tasks, [&](size_t task, size_t worker) {
    size_t a = refs.size() * task / tasks, b = refs.size() * (task + 1) / tasks;
    TaskOut& out = (*outs)[task];
    for (size_t i = a; i < b; ++i) Process(refs[i], i, source, worker, out, screen);
    out.offsets.push_back(out.ids.size());
  });
  return tasks;
}

void RecordEncoder::Process(const RecRef& ref, size_t i, size_t source, size_t worker, TaskOut& out,
                            bool screen) {
  const size_t from = out.ids.size();
  out.offsets.push_back(from);
  if (!ref.needed) return;
  WorkerScratch& ws = scratch_[worker];
  RenderedRecord& rr = ws.record;
  size_t replaced = 0;
  Status st = renderers_[source][worker]->Render(ref.rec.json, &rr, &replaced);
  out.replaced += replaced;
  const bool rendered = st.ok();
  if (st.ok() && screen) {
    if (masks_ && rr.text.size() > UINT32_MAX) {
      out.errors.push_back({i, InvalidArgumentError("text over 4 GiB"), "tokenize"});
    }
    return;
  }
  if (st.ok() && masks_) {
    if ((rr.chat || rr.completion_only) && tok_->normalizes_nfc() && !tokenize::IsNfcQuick(rr.text))
      NormalizeWithSpans(&rr, &ws.nfc);
    ws.ends.clear();
    st = tok_->EncodeWithOffsets(rr.text, &out.ids, &ws.ends);
    if (st.ok() && (rr.chat || rr.completion_only)) {
      MaskFromSpans(ws.ends, rr.spans, &out.mask);
    } else if (st.ok()) {
      out.mask.resize(out.ids.size(), 1);
    }
  } else if (st.ok() && rr.parsed_strings) {
    tok_->EncodeChecked(rr.text, &out.ids);  // (0.9% of a one-core pack was the second check)
  } else if (st.ok()) {
    st = tok_->Encode(rr.text, &out.ids);
  }
  if (st.ok()) {
    // EOS closes every record; after a chat record only when its ids do not
    // already end with it (TRL's rule: a template that ends turns with EOS does not
    // get it twice).
    if (!rr.chat || out.ids.size() == from || out.ids.back() != eos_id_) {
      out.ids.push_back(eos_id_);
      if (masks_) out.mask.push_back(rr.chat ? 0 : 1);
    }
    out.chat += rr.chat ? 1 : 0;
    out.drop_records += rr.dropped_parts ? 1 : 0;
    out.drop_parts += rr.dropped_parts;
  } else {
    out.ids.resize(from);
    if (masks_) out.mask.resize(from);
    std::string_view reason = SkipReason(st, rendered);
    out.errors.push_back({i, std::move(st), reason});
  }
}

}  // namespace ek::pack
