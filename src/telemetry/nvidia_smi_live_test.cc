#include "telemetry/nvidia_smi_live.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "core/fake_clock.h"

namespace ek::telemetry {
namespace {

class ScriptedLines : public LineStream {
 public:
  explicit ScriptedLines(std::vector<std::vector<std::string>> rounds)
      : rounds_(std::move(rounds)) {}
  Status ReadLines(double, std::vector<std::string>* lines, bool* eof) override {
    *eof = next_ >= rounds_.size();
    if (!*eof) {
      for (auto& l : rounds_[next_]) lines->push_back(l);
      ++next_;
    }
    return Status::Ok();
  }

 private:
  std::vector<std::vector<std::string>> rounds_;
  size_t next_ = 0;
};

TEST(NvidiaSmiLive, CommandIsTheIssuesQuery) {
  auto argv = NvidiaSmiCommand("nvidia-smi", 1);
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[1], "--query-gpu=timestamp,index,utilization.gpu,power.draw,memory.used");
  EXPECT_EQ(argv[2], "--format=csv");
  EXPECT_EQ(argv[3], "-l");
  EXPECT_EQ(argv[4], "1");
  EXPECT_EQ(NvidiaSmiCommand("nvidia-smi", 0.5)[3], "-lms");
}

TEST(NvidiaSmiLive, ChildLinesUntilEof) {
  FakeClock clock;
  auto child = ChildLineStream::Spawn(
      {"sh", "-c", "printf 'a, b\\n1, 2\\n'; printf 'tail-without-newline'"}, Clock::Default());
  ASSERT_TRUE(child.ok()) << child.status().message();
  std::vector<std::string> lines;
  bool eof = false;
  for (int i = 0; i < 100 && !eof; ++i) {
    ASSERT_TRUE((*child)->ReadLines(Clock::Default()->Now() + 0.1, &lines, &eof).ok());
  }
  EXPECT_TRUE(eof);
  EXPECT_EQ(lines, (std::vector<std::string>{"a, b", "1, 2", "tail-without-newline"}));
  EXPECT_EQ((*child)->exit_status(), std::optional<int>(0));
}

TEST(NvidiaSmiLive, ReadReturnsAtDeadlineWhileChildIsQuiet) {
  auto child = ChildLineStream::Spawn({"sleep", "5"}, Clock::Default());
  ASSERT_TRUE(child.ok());
  std::vector<std::string> lines;
  bool eof = true;
  double start = Clock::Default()->Now();
  ASSERT_TRUE((*child)->ReadLines(start + 0.2, &lines, &eof).ok());
  double took = Clock::Default()->Now() - start;
  EXPECT_FALSE(eof);
  EXPECT_GE(took, 0.15);
  EXPECT_LT(took, 2.0);  // the destructor kills `sleep` instead of waiting 5 s
}

TEST(NvidiaSmiLive, ChildThatClosesStdoutAndLingersIsStopped) {
  // The second it is given to exit after EOF passes on a fake clock. (The
  // stream ends at once, so no read waits on the clock that stands still.)
  FakeClock clock;
  auto child = ChildLineStream::Spawn({"sh", "-c", "echo one; exec >&-; exec sleep 30"}, &clock);
  ASSERT_TRUE(child.ok());
  std::vector<std::string> lines;
  bool eof = false;
  double start = Clock::Default()->Now();
  for (int i = 0; i < 100 && !eof; ++i) {
    ASSERT_TRUE((*child)->ReadLines(clock.Now() + 0.1, &lines, &eof).ok());
  }
  EXPECT_TRUE(eof);
  EXPECT_LT(Clock::Default()->Now() - start, 5.0);
  EXPECT_GE(clock.slept(), 0.99);
  EXPECT_EQ((*child)->exit_status(), std::optional<int>(128 + SIGTERM));
}

TEST(NvidiaSmiLive, MissingProgramIsUnavailable) {
  auto child = ChildLineStream::Spawn({"/nonexistent/nvidia-smi"}, Clock::Default());
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), StatusCode::kUnavailable);
}

TEST(NvidiaSmiLive, SamplesAreStampedAtReceipt) {
  FakeClock clock(5000);
  auto lines = std::make_unique<ScriptedLines>(std::vector<std::vector<std::string>>{
      {"timestamp, index, utilization.gpu [%], power.draw [W], memory.used [MiB]",
       "2020/01/01 00:00:00.000, 0, 100 %, 990 W, 1 MiB"},
      {"2020/01/01 00:00:01.000, 0, [N/A], 991 W, 1 MiB", "junk"}});
  NvidiaSmiSource source(std::move(lines), &clock, "node-a");
  Batch b;
  ASSERT_TRUE(source.Poll(5001, &b).ok());
  ASSERT_EQ(b.samples.size(), 1u);
  EXPECT_DOUBLE_EQ(b.samples[0].time, 5000);
  clock.Advance(1);
  ASSERT_TRUE(source.Poll(5002, &b).ok());
  ASSERT_EQ(b.samples.size(), 2u);
  EXPECT_DOUBLE_EQ(b.samples[1].time, 5001);
  EXPECT_FALSE(b.samples[1].util_pct.has_value());
  ASSERT_EQ(b.problems.size(), 1u);
  EXPECT_EQ(b.problems[0].where, "nvidia-smi:4");
  EXPECT_FALSE(b.end);
  ASSERT_TRUE(source.Poll(5003, &b).ok());
  EXPECT_TRUE(b.end);
}

TEST(NvidiaSmiLive, FailingChildIsAnErrorWithItsMessage) {
  auto child = ChildLineStream::Spawn(
      {"sh", "-c",
       "echo 'NVIDIA-SMI has failed because it couldn'\\''t communicate with the NVIDIA "
       "driver.'; exit 9"},
      Clock::Default());
  ASSERT_TRUE(child.ok());
  NvidiaSmiSource source(std::move(*child), Clock::Default(), "node-a");
  Status last;
  Batch b;
  for (int i = 0; i < 50 && !b.end; ++i) last = source.Poll(Clock::Default()->Now() + 0.1, &b);
  ASSERT_TRUE(b.end);
  EXPECT_EQ(last.code(), StatusCode::kUnavailable);
  EXPECT_NE(last.message().find("exited with status 9 without a sample: NVIDIA-SMI has failed"),
            std::string::npos)
      << last.message();
}

}  // namespace
}  // namespace ek::telemetry
