#include "report/html.h"

namespace ek::report {

namespace assets {
extern const std::string_view kPageHtml, kPageJs, kPageCss, kUplotJs, kUplotCss;
}  // namespace assets

namespace {

void ReplaceOnce(std::string* s, std::string_view marker, const std::string& with) {
  auto at = s->find(marker);
  if (at != std::string::npos) s->replace(at, marker.size(), with);
}

}  // namespace

std::string AssembleHtml(std::string_view model_json) {
  std::string page(assets::kPageHtml);
  std::string style = "<style>\n" + std::string(assets::kUplotCss) + "\n" +
                      std::string(assets::kPageCss) + "\n</style>";
  std::string script = "<script>\n" + std::string(assets::kUplotJs) + "\n" +
                       std::string(assets::kPageJs) + "\n</script>";
  std::string data = "<script id=\"ek-data\" type=\"application/json\">";
  data.reserve(model_json.size() + 64);
  for (char c : model_json) {
    // '<' only occurs inside JSON strings; \u003c there keeps "</script" and "<!--"
    // (which can hide the rest of a page) out of the script element.
    if (c == '<') {
      data += "\\u003c";
    } else {
      data += c;
    }
  }
  data += "</script>";
  // Data last: the page's own markers cannot appear inside it.
  ReplaceOnce(&page, "<!--EK_STYLE-->", style);
  ReplaceOnce(&page, "<!--EK_SCRIPT-->", script);
  ReplaceOnce(&page, "<!--EK_DATA-->", data);
  return page;
}

}  // namespace ek::report
