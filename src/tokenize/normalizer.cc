#include "tokenize/normalizer.h"

#include <numeric>

#include "tokenize/unicode.h"

namespace ek::tokenize {

void Normalizer::AddPrepend(std::string text) {
  steps_.push_back(Step{Step::kPrepend, std::move(text), nullptr});
}

void Normalizer::AddReplace(std::unique_ptr<Pattern> pattern, std::string content) {
  steps_.push_back(Step{Step::kReplace, std::move(content), std::move(pattern)});
}

void Normalizer::AddNfc() {
  steps_.push_back(Step{Step::kNfc, {}, nullptr});
  has_nfc_ = true;
}

void Normalizer::AddNfkc() { steps_.push_back(Step{Step::kNfkc, {}, nullptr}); }

std::string Normalizer::Describe() const {
  std::string out;
  for (const Step& s : steps_) {
    if (!out.empty()) out += "+";
    switch (s.kind) {
      case Step::kPrepend:
        out += "prepend";
        break;
      case Step::kReplace:
        out += "replace";
        break;
      case Step::kNfc:
        out += "NFC";
        break;
      case Step::kNfkc:
        out += "NFKC";
        break;
    }
  }
  return out.empty() ? "none" : out;
}

void Normalizer::Apply(std::string_view in, std::string* out, std::vector<uint32_t>* align,
                       std::string* tmp, std::vector<uint32_t>* tmp_align) const {
  out->assign(in);
  if (align) {
    align->resize(in.size() + 1);
    std::iota(align->begin(), align->end(), 0u);
  }
  for (const Step& step : steps_) {
    tmp->clear();
    ApplyStep(step, *out, tmp, align ? tmp_align : nullptr);
    out->swap(*tmp);
    if (align) {
      // Compose: the step's boundaries index the previous output's.
      for (uint32_t& j : *tmp_align) j = (*align)[j];
      align->swap(*tmp_align);
    }
  }
}

void Normalizer::ApplyStep(const Step& step, std::string_view in, std::string* out,
                           std::vector<uint32_t>* align) const {
  if (align) align->clear();
  switch (step.kind) {
    case Step::kPrepend:
      if (!in.empty()) out->append(step.text);
      if (align) align->assign(out->size(), 0u);
      out->append(in);
      if (align) {
        for (uint32_t j = 0; j <= in.size(); ++j) align->push_back(j);
      }
      return;
    case Step::kReplace: {
      std::vector<Span> matches;
      step.pattern->FindMatches(in, &matches);
      uint32_t prev = 0;
      auto keep = [&](uint32_t b, uint32_t e) {
        if (align) {
          for (uint32_t j = b; j < e; ++j) align->push_back(j);
        }
        out->append(in.substr(b, e - b));
      };
      for (const Span& m : matches) {
        keep(prev, m.begin);
        if (align && !step.text.empty()) {
          align->push_back(m.begin);
          // A byte inside or after the content maps to the end of the match.
          for (size_t k = 1; k < step.text.size(); ++k) align->push_back(m.end);
        }
        out->append(step.text);
        prev = m.end;
      }
      keep(prev, static_cast<uint32_t>(in.size()));
      if (align) align->push_back(static_cast<uint32_t>(in.size()));
      return;
    }
    case Step::kNfc:
    case Step::kNfkc: {
      if (step.kind == Step::kNfc) {
        AppendNfc(in, out);
      } else {
        AppendNfkc(in, out);
      }
      if (!align) return;
      if (*out == in) {
        align->resize(in.size() + 1);
        std::iota(align->begin(), align->end(), 0u);
      } else {
        align->assign(out->size(), 0u);
        align->push_back(static_cast<uint32_t>(in.size()));
      }
      return;
    }
  }
}

}  // namespace ek::tokenize
