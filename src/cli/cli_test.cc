#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace ek::cli {
namespace {

TEST(ExitCodes, EveryStatusCodeHasItsCode) {
  EXPECT_EQ(ExitCodeFor(StatusCode::kOk), 0);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInvalidArgument), 65);
  EXPECT_EQ(ExitCodeFor(StatusCode::kNotFound), 65);
  EXPECT_EQ(ExitCodeFor(StatusCode::kCorrupt), 65);
  EXPECT_EQ(ExitCodeFor(StatusCode::kUnsupported), 65);
  EXPECT_EQ(ExitCodeFor(StatusCode::kFailedPrecondition), 65);
  EXPECT_EQ(ExitCodeFor(StatusCode::kUnavailable), 69);
  EXPECT_EQ(ExitCodeFor(StatusCode::kIoError), 74);
  EXPECT_EQ(ExitCodeFor(StatusCode::kInternal), 70);
  EXPECT_EQ(ReportError(IoError("disk full")), kExitIoError);
  EXPECT_EQ(ReportError(Status::Ok()), kExitInternal);  // reporting success as an error is a bug
}

TEST(NearestName, SuggestsOnlyCloseNames) {
  std::vector<std::string> flags = {"--prefix", "--json", "--threads", "--mismatch-cap",
                                    "--help",   "-p",     "-j"};
  EXPECT_EQ(NearestName("--prefx", flags), "--prefix");
  EXPECT_EQ(NearestName("--jsn", flags), "--json");
  EXPECT_EQ(NearestName("--thread", flags), "--threads");
  EXPECT_EQ(NearestName("--thraeds", flags), "--threads");        // a transposition is one edit
  EXPECT_EQ(NearestName("--mismatch", flags), "--mismatch-cap");  // an abbreviation
  EXPECT_EQ(NearestName("--bogus", flags), "");
  EXPECT_EQ(NearestName("--x", flags), "");
  EXPECT_EQ(NearestName("--tokeniser", {"--tokenizer", "--text-field"}), "--tokenizer");
  EXPECT_EQ(NearestName("tokenise", {"tokenize", "detokenize", "pack"}), "tokenize");
}

// What ParseArgs would print for `args`, through the same function.
std::string Describe(CLI::App& app, std::vector<std::string> args) {
  std::vector<std::string> argv = {"prog"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  for (auto& a : argv) ptrs.push_back(a.data());
  try {
    app.parse(static_cast<int>(ptrs.size()), ptrs.data());
  } catch (const CLI::ParseError& e) {
    return DescribeParseError(app, args, e.what(),
                              dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr);
  }
  return "";
}

TEST(DescribeParseError, NamesTheProblemAPersonCanAct) {
  auto make = [](std::string* dir, std::string* prefix, int* threads) {
    auto app = std::make_unique<CLI::App>("test", "evenkeel fr");
    app->add_option("DIR", *dir, "dir")->required();
    app->add_option("-p,--prefix", *prefix, "prefix");
    app->add_option("-j,--threads", *threads, "threads");
    return app;
  };
  std::string dir, prefix;
  int threads = 0;
  {
    auto app = make(&dir, &prefix, &threads);
    // The unknown flag wins over the missing DIR: it is the cause.
    EXPECT_EQ(Describe(*app, {"--prefx"}), "unknown flag --prefx (did you mean --prefix?)");
  }
  {
    auto app = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*app, {"d", "--prefx=x"}), "unknown flag --prefx (did you mean --prefix?)");
  }
  {
    auto app = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*app, {"d", "--bogus"}), "unknown flag --bogus");
  }
  {
    auto app = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*app, {"d", "-q"}), "unknown flag -q");
  }
  {
    auto app = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*app, {"d", "e"}), "unexpected argument 'e' (see evenkeel fr --help)");
  }
  {
    auto app = make(&dir, &prefix, &threads);
    std::string m = Describe(*app, {});
    EXPECT_NE(m.find("DIR is required"), std::string::npos) << m;
    EXPECT_NE(m.find("(see evenkeel fr --help)"), std::string::npos) << m;
  }
  {
    auto app = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*app, {"d", "--threads", "x"}),
              "--threads x: not a valid value (see evenkeel fr --help)");
    auto again = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*again, {"d", "--prefix"}),
              "--prefix needs a value (see evenkeel fr --help)");
  }
  {
    auto app = make(&dir, &prefix, &threads);
    EXPECT_EQ(Describe(*app, {"d", "-j", "-1"}), "");  // a negative number is a value, not a flag
  }
}

TEST(ParseArgs, HelpIsSuccessAndErrorsAreUsage) {
  std::string dir;
  CLI::App app("test", "evenkeel fr");
  app.add_option("DIR", dir, "dir")->required();
  std::vector<std::string> help = {"prog", "--help"};
  std::vector<char*> h;
  for (auto& a : help) h.push_back(a.data());
  testing::internal::CaptureStdout();
  EXPECT_EQ(ParseArgs(app, 2, h.data()), std::optional<int>(kExitOk));
  EXPECT_NE(testing::internal::GetCapturedStdout().find("DIR"), std::string::npos);
  CLI::App app2("test", "evenkeel fr");
  app2.add_option("DIR", dir, "dir")->required();
  std::vector<std::string> bad = {"prog", "--nope"};
  std::vector<char*> b;
  for (auto& a : bad) b.push_back(a.data());
  testing::internal::CaptureStderr();
  EXPECT_EQ(ParseArgs(app2, 2, b.data()), std::optional<int>(kExitUsage));
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "evenkeel: error: unknown flag --nope\n");
  CLI::App app3("test", "evenkeel fr");
  app3.add_option("DIR", dir, "dir")->required();
  std::vector<std::string> good = {"prog", "d"};
  std::vector<char*> g;
  for (auto& a : good) g.push_back(a.data());
  EXPECT_EQ(ParseArgs(app3, 2, g.data()), std::nullopt);
  EXPECT_EQ(dir, "d");
}

}  // namespace
}  // namespace ek::cli
