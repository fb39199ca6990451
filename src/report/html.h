// The self-contained report page: the template (src/report/page/report.html)
// with uPlot's and the page's CSS and JS and the data model inlined, so the
// file opens from disk with no network.
#pragma once

#include <string>
#include <string_view>

namespace ek::report {

// The page around `model_json` (Recorder::ToJson). Every '<' in the JSON (they
// are all inside strings) is written \u003c, so no string can end the script
// element or open a comment that hides the rest of the page.
std::string AssembleHtml(std::string_view model_json);

}  // namespace ek::report
