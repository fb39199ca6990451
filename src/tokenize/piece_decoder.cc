#include "tokenize/piece_decoder.h"

#include <string_view>

#include "tokenize/unicode.h"

namespace ek::tokenize {

namespace {

// The byte of a "<0xHH>" token (Hugging Face: six bytes, "<0x", two hex
// digits of either case (u8::from_str_radix), ">"), or -1.
int FallbackByte(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  std::string_view digits = t.substr(3, 2);
  if (digits[0] == '+') digits.remove_prefix(1);  // Rust's from_str_radix takes a sign
  int v = 0;
  for (char c : digits) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

std::vector<uint32_t> CodePoints(std::string_view s) {
  std::vector<uint32_t> cps;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    i += DecodeUtf8(p + i, &cp);
    cps.push_back(cp);
  }
  return cps;
}

}  // namespace

void PieceDecoder::AddReplace(std::unique_ptr<Pattern> pattern, std::string content) {
  Step s(Step::kReplace);
  s.pattern = std::move(pattern);
  s.content = std::move(content);
  steps_.push_back(std::move(s));
}

void PieceDecoder::AddByteFallback() { steps_.emplace_back(Step::kByteFallback); }

void PieceDecoder::AddFuse() { steps_.emplace_back(Step::kFuse); }

void PieceDecoder::AddStrip(uint32_t content, size_t start, size_t stop) {
  Step s(Step::kStrip);
  s.ch = content;
  s.start = start;
  s.stop = stop;
  steps_.push_back(std::move(s));
}

void PieceDecoder::AddMetaspace(uint32_t replacement, bool drop_in_first) {
  Step s(Step::kMetaspace);
  s.ch = replacement;
  s.drop_in_first = drop_in_first;
  steps_.push_back(std::move(s));
}

void PieceDecoder::Decode(std::vector<std::string> tokens, std::string* out) const {
  for (const Step& step : steps_) Apply(step, &tokens);
  for (const std::string& t : tokens) out->append(t);
}

void PieceDecoder::Apply(const Step& step, std::vector<std::string>* tokens) const {
  std::vector<std::string>& toks = *tokens;
  switch (step.kind) {
    case Step::kReplace: {
      std::vector<Span> spans;
      for (std::string& t : toks) {
        spans.clear();
        step.pattern->FindMatches(t, &spans);
        if (spans.empty()) continue;
        std::string r;
        uint32_t prev = 0;
        for (const Span& m : spans) {
          r.append(t, prev, m.begin - prev);
          r.append(step.content);
          prev = m.end;
        }
        r.append(t, prev, std::string::npos);
        t.swap(r);
      }
      return;
    }
    case Step::kByteFallback: {
      std::vector<std::string> result;
      std::string run;  // the bytes of consecutive <0xHH> tokens
      auto flush = [&] {
        if (run.empty()) return;
        if (FirstInvalidUtf8(run) == std::string::npos) {
          result.push_back(run);
        } else {
          for (size_t k = 0; k < run.size(); ++k) result.emplace_back("\xEF\xBF\xBD");
        }
        run.clear();
      };
      for (std::string& t : toks) {
        int b = FallbackByte(t);
        if (b >= 0) {
          run.push_back(static_cast<char>(b));
        } else {
          flush();
          result.push_back(std::move(t));
        }
      }
      flush();
      toks.swap(result);
      return;
    }
    case Step::kFuse: {
      std::string all;
      for (const std::string& t : toks) all += t;
      toks.clear();
      toks.push_back(std::move(all));
      return;
    }
    case Step::kStrip:
      for (std::string& t : toks) {
        std::vector<uint32_t> cps = CodePoints(t);
        size_t begin = 0, end = cps.size();
        for (size_t i = 0; i < step.start && i < cps.size() && cps[i] == step.ch; ++i)
          begin = i + 1;
        for (size_t i = 0; i < step.stop && i < cps.size() && cps[cps.size() - 1 - i] == step.ch;
             ++i)
          end = cps.size() - 1 - i;
        if (begin == 0 && end == cps.size()) continue;
        std::string r;
        for (size_t i = begin; i < end; ++i) AppendUtf8(&r, cps[i]);
        t.swap(r);
      }
      return;
    case Step::kMetaspace:
      for (size_t i = 0; i < toks.size(); ++i) {
        std::vector<uint32_t> cps = CodePoints(toks[i]);
        std::string r;
        for (uint32_t cp : cps) {
          if (cp != step.ch) {
            AppendUtf8(&r, cp);
          } else if (i != 0 || !step.drop_in_first) {
            r.push_back(' ');
          }
        }
        toks[i].swap(r);
      }
      return;
  }
}

}  // namespace ek::tokenize
