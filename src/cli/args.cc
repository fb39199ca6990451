// Command-line parsing for every command: CLI11 underneath, and one way of
// saying what went wrong ("evenkeel: error: unknown flag --prefx (did you mean
// --prefix?)", exit 2).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace ek::cli {

namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transposition.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string_view StripDashes(std::string_view s) {
  while (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return s;
}

void CollectFlags(const CLI::App& app, std::vector<std::string>* out) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) out->push_back("--" + l);
    for (const auto& s : opt->get_snames()) out->push_back("-" + s);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    CollectFlags(*sub, out);
  }
}

// "evenkeel ckpt verify" for the help hint: the app and the subcommand parsed.
std::string CommandPath(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* sub : app.get_subcommands()) path += " " + sub->get_name();
  return path;
}

// A flag-looking token that is not one of the app's: "--prefx", "--x=1", "-q".
// Negative numbers ("-1") and a lone "-" (stdin) are values, not flags.
std::string UnknownFlag(const std::vector<std::string>& argv,
                        const std::vector<std::string>& known) {
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  for (const std::string& arg : argv) {
    if (arg == "--") break;
    std::string name;
    if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-' && alpha(arg[2])) {
      name = arg.substr(0, arg.find('='));
    } else if (arg.size() >= 2 && arg[0] == '-' && alpha(arg[1])) {
      name = arg.substr(0, 2);
    } else {
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) return name;
  }
  return "";
}

// CLI11's wording where a person would not guess what to do.
std::string Rephrase(const std::string& m) {
  // "Could not convert: --threads = x"
  static const std::regex convert(R"(^Could not convert: (\S+) = (.*)$)");
  // "--tokenizer: 1 required TEXT missing"
  static const std::regex missing(R"(^(\S+): \d+ required \S+ missing$)");
  std::smatch g;
  if (std::regex_match(m, g, convert)) return g[1].str() + " " + g[2].str() + ": not a valid value";
  if (std::regex_match(m, g, missing)) return g[1].str() + " needs a value";
  return m;
}

}  // namespace

std::string NearestName(std::string_view typed, const std::vector<std::string>& candidates) {
  std::string_view t = StripDashes(typed);
  if (t.size() < 2) return "";  // one letter is one edit from every other: no guess
  const size_t limit = t.size() <= 4 ? 1 : t.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_d = limit + 1;
  std::string prefix_of;  // the one candidate `typed` abbreviates, if only one
  int prefix_count = 0;
  for (const std::string& c : candidates) {
    std::string_view name = StripDashes(c);
    if (name.size() < 2 || name == t) continue;  // short flags (-j) are not guessed either
    size_t d = EditDistance(t, name);
    if (d < best_d) best_d = d, best = c;
    if (t.size() >= 3 && name.starts_with(t)) ++prefix_count, prefix_of = c;
  }
  if (!best.empty()) return best;
  return prefix_count == 1 ? prefix_of : "";
}

std::string DescribeParseError(const CLI::App& app, const std::vector<std::string>& argv,
                               const std::string& cli11_message, bool extras_error) {
  std::vector<std::string> known;
  CollectFlags(app, &known);
  std::string unknown = UnknownFlag(argv, known);
  if (!unknown.empty()) {
    std::string near = NearestName(unknown, known);
    return "unknown flag " + unknown + (near.empty() ? "" : " (did you mean " + near + "?)");
  }
  std::string help = " (see " + CommandPath(app) + " --help)";
  if (extras_error) {
    std::vector<std::string> extra = app.remaining(true);
    if (!extra.empty()) {
      std::string list;
      for (size_t i = 0; i < extra.size(); ++i) list += (i ? " '" : "'") + extra[i] + "'";
      return (extra.size() == 1 ? "unexpected argument " : "unexpected arguments ") + list + help;
    }
  }
  return Rephrase(cli11_message) + help;
}

std::optional<int> ParseArgs(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      // --help (and --help-all): CLI11 prints it to stdout.
      app.exit(e);
      return kExitOk;
    }
    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    bool extras = dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
    return UsageError(DescribeParseError(app, args, e.what(), extras));
  }
  return std::nullopt;
}

}  // namespace ek::cli
