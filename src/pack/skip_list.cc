#include "pack/skip_list.h"

#include "core/json_out.h"

namespace ek::pack {

std::string_view SkipReason(const Status& st, bool from_tokenizer) {
  if (from_tokenizer) return "tokenize";
  const std::string& m = st.message();
  if (m.find("invalid UTF-8") != std::string::npos || m.find("lone surrogate") != std::string::npos)
    return "invalid_utf8";
  if (m.rfind("malformed JSON", 0) == 0) return "invalid_json";
  if (m.find("template") != std::string::npos) return "template";
  return "shape";  // a missing or mistyped field, an unknown shape or role
}

std::string SkipHint(std::string_view reason, InvalidUtf8Policy policy) {
  if (reason == "invalid_utf8" && policy == InvalidUtf8Policy::kError) {
    return " (pass --invalid-utf8 replace to replace bad bytes with U+FFFD, or --skip-bad to "
           "skip the record)";
  }
  return " (--skip-bad skips such records and lists them in skipped.jsonl)";
}

Status SkipList::Add(const ingest::SourceRecord& r, size_t input_no, const Status& st,
                     std::string_view reason) {
  if (!file_) {
    EK_RETURN_IF_ERROR(MakeDirs(dir_, env_));
    EK_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(dir_ + "/" + kSkippedFileName, env_));
    file_ = std::make_unique<AtomicFile>(std::move(f));
  }
  const char* unit = r.unit == ingest::Unit::kLine      ? "line"
                     : r.unit == ingest::Unit::kElement ? "element"
                                                        : "row";
  JsonWriter w;
  w.BeginObject().Key("file").Str(r.file ? *r.file : std::string("-")).Key(unit).Uint(r.number);
  w.Key("reason").Str(reason).Key("error").Str(st.message()).EndObject();
  buf_ += w.Line();
  if (buf_.size() >= (1u << 20)) EK_RETURN_IF_ERROR(Flush());
  ++m_->skipped_bad;
  ++m_->inputs[input_no].skipped_bad;
  ++m_->skipped_reasons[std::string(reason)];
  if (m_->bad_examples.size() < 10)
    m_->bad_examples.push_back({r.file ? *r.file : "-", r.number, st.message()});
  return Status::Ok();
}

Status SkipList::Sync() {
  if (!file_) return Status::Ok();
  EK_RETURN_IF_ERROR(Flush());
  return file_->Sync();
}

Status SkipList::Commit() {
  if (file_) return file_->Commit();
  Status st = env_->RemoveFile(dir_ + "/" + kSkippedFileName);
  return st.ok() || st.code() == StatusCode::kNotFound ? Status::Ok() : st;
}

Status SkipList::Flush() {
  EK_RETURN_IF_ERROR(file_->Write(buf_));
  buf_.clear();
  return Status::Ok();
}

}  // namespace ek::pack
