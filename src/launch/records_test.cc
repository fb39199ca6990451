#include "launch/records.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <limits>
#include <string>

#include "core/status.h"

namespace ek::launch {
namespace {

// `json` with the first occurrence of `from` replaced by `to`.
std::string With(std::string json, const std::string& from, const std::string& to) {
  auto at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from << " not in " << json;
  if (at != std::string::npos) json.replace(at, from.size(), to);
  return json;
}

template <typename T>
std::string ErrorOf(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().message();
  return r.status().message();
}

RankRecord Rank(int rank) {
  RankRecord r;
  r.rank = rank;
  r.local_rank = rank % 2;
  r.node_rank = rank / 2;
  r.host = "n1";
  r.pid = 4242 + rank;
  r.start = 1700000000.5;
  r.end = 1700000100.25;
  r.exit_code = rank == 3 ? 1 : 0;
  r.signal = 0;
  r.log = "/l/attempt-001/rank-" + std::to_string(rank) + ".log";
  return r;
}

NodeRecord Node1() {
  NodeRecord n;
  n.node = 1;
  n.host = "n1";
  n.start = 1700000000.125;
  n.end = 1700000200.5;
  n.torchrun_code = 1;
  n.torchrun_signal = 0;
  n.cancelled = false;
  n.step_reached = 40;
  n.ranks = {Rank(2), Rank(3)};
  return n;
}

constexpr const char* kNodeFile = "attempt-001/node-1.json";

TEST(NodeRecordTest, RoundTrips) {
  NodeRecord n = Node1();
  n.error = "cannot start \"torchrun\"";
  auto back = NodeRecordFromJson(NodeRecordToJson(n), kNodeFile);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->node, 1);
  EXPECT_EQ(back->host, "n1");
  EXPECT_DOUBLE_EQ(back->start, 1700000000.125);
  EXPECT_DOUBLE_EQ(back->end, 1700000200.5);
  EXPECT_EQ(back->torchrun_code, 1);
  EXPECT_EQ(back->torchrun_signal, 0);
  EXPECT_FALSE(back->cancelled);
  EXPECT_EQ(back->step_reached, 40);
  EXPECT_EQ(back->error, n.error);
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[1].rank, 3);
  EXPECT_EQ(back->ranks[1].pid, 4245);
  EXPECT_EQ(back->ranks[1].exit_code, 1);
  EXPECT_EQ(back->ranks[1].log, "/l/attempt-001/rank-3.log");
  // A node that never started torchrun: exit code -1, no ranks.
  NodeRecord none;
  none.error = "no torchrun";
  auto empty = NodeRecordFromJson(NodeRecordToJson(none), kNodeFile);
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_EQ(empty->torchrun_code, -1);
  EXPECT_EQ(empty->step_reached, -1);
  EXPECT_TRUE(empty->ranks.empty());
}

TEST(NodeRecordTest, TheCausesOfFailedRanksRoundTripAndAreReadStrictly) {
  NodeRecord n = Node1();
  n.causes = {{3,
               "OSError: [Errno 28] No space left on device: '/c/model-00001-of-00001.safetensors' "
               "(in save)"}};
  const std::string good = NodeRecordToJson(n);
  auto back = NodeRecordFromJson(good, kNodeFile);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->causes.size(), 1u);
  EXPECT_EQ(back->causes[0].rank, 3);
  EXPECT_EQ(back->causes[0].cause, n.causes[0].cause);
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, ", \"causes\": [", ", \"x\": ["), kNodeFile)),
            "attempt-001/node-1.json: causes: missing");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(
                With(good, "{\"rank\": 3, \"cause\"", "{\"rank\": \"3\", \"cause\""), kNodeFile)),
            "attempt-001/node-1.json: causes[0].rank: not an integer");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"cause\": \"OSError", "\"why\": \"OSError"),
                                       kNodeFile)),
            "attempt-001/node-1.json: causes[0].cause: missing");
}

TEST(NodeRecordTest, AMissingFieldIsAnErrorNamingItAndTheFile) {
  const std::string good = NodeRecordToJson(Node1());
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"step_reached\": 40, ", ""), kNodeFile)),
            "attempt-001/node-1.json: step_reached: missing");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"host\": \"n1\", \"start\"", "\"start\""),
                                       kNodeFile)),
            "attempt-001/node-1.json: host: missing");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "{\"exit_code\": 1, ", "{"), kNodeFile)),
            "attempt-001/node-1.json: torchrun.exit_code: missing");
}

TEST(NodeRecordTest, AMistypedFieldIsAnErrorNamingIt) {
  const std::string good = NodeRecordToJson(Node1());
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"cancelled\": false", "\"cancelled\": \"no\""),
                                       kNodeFile)),
            "attempt-001/node-1.json: cancelled: not true or false");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"node\": 1", "\"node\": \"1\""), kNodeFile)),
            "attempt-001/node-1.json: node: not an integer");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"node\": 1", "\"node\": -1"), kNodeFile)),
            "attempt-001/node-1.json: node: -1 is out of range [0, 2147483647]");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"step_reached\": 40", "\"step_reached\": 40.5"),
                                       kNodeFile)),
            "attempt-001/node-1.json: step_reached: not an integer");
}

TEST(NodeRecordTest, AMisnestedFieldIsAnErrorNamingItsPath) {
  const std::string good = NodeRecordToJson(Node1());
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "{\"exit_code\": 1, \"signal\": 0}", "[1, 0]"),
                                       kNodeFile)),
            "attempt-001/node-1.json: torchrun: not an object");
  std::string ranks_object = With(good, "\"ranks\": [", "\"ranks\": {\"r\": [");
  ranks_object.insert(ranks_object.rfind(']') + 1, "}");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(ranks_object, kNodeFile)),
            "attempt-001/node-1.json: ranks: not an array");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(
                With(good, "\"step_reached\": 40", "\"torchrun_step\": {\"step_reached\": 40}"),
                kNodeFile)),
            "attempt-001/node-1.json: step_reached: missing");
}

// A bad rank record inside a node record used to be dropped without a word.
TEST(NodeRecordTest, ABadRankRecordInsideIsAnErrorNamingItsIndexAndField) {
  const std::string good = NodeRecordToJson(Node1());
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"pid\": 4245, ", ""), kNodeFile)),
            "attempt-001/node-1.json: ranks[1].pid: missing");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(
                With(good, "\"exit_code\": 0, \"signal\"", "\"exit_code\": null, \"signal\""),
                kNodeFile)),
            "attempt-001/node-1.json: ranks[0].exit_code: not an integer");
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"ranks\": [", "\"ranks\": [7, "), kNodeFile)),
            "attempt-001/node-1.json: ranks[0]: not an object");
}

TEST(NodeRecordTest, MalformedJsonOrNotAnObjectNamesTheFile) {
  std::string bad = ErrorOf(NodeRecordFromJson("{\"node\": 1,", kNodeFile));
  EXPECT_EQ(bad.rfind("attempt-001/node-1.json: malformed JSON: ", 0), 0u) << bad;
  EXPECT_EQ(ErrorOf(NodeRecordFromJson("[1]", kNodeFile)),
            "attempt-001/node-1.json: not a JSON object");
}

TEST(NodeRecordTest, TheRanksLastHeartbeatsRoundTripAndAreReadStrictly) {
  NodeRecord n = Node1();
  n.progress = {{2, 7, "forward", 8, 1700000050.25, 4244}, {3, -1, "load", -1, 1700000001.5, 4245}};
  const std::string good = NodeRecordToJson(n);
  auto back = NodeRecordFromJson(good, kNodeFile);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->progress.size(), 2u);
  EXPECT_EQ(back->progress[0].rank, 2);
  EXPECT_EQ(back->progress[0].step, 7);
  EXPECT_EQ(back->progress[0].phase, "forward");
  EXPECT_EQ(back->progress[0].phase_step, 8);
  EXPECT_DOUBLE_EQ(back->progress[0].time, 1700000050.25);
  EXPECT_EQ(back->progress[0].pid, 4244);
  EXPECT_EQ(back->progress[1].step, -1);
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(With(good, "\"step\": 7, ", ""), kNodeFile)),
            "attempt-001/node-1.json: progress[0].step: missing");
  EXPECT_EQ(
      ErrorOf(NodeRecordFromJson(With(good, "\"phase\": \"forward\"", "\"phase\": 3"), kNodeFile)),
      "attempt-001/node-1.json: progress[0].phase: not a string");
  EXPECT_EQ(
      ErrorOf(NodeRecordFromJson(With(good, "\"progress\": [{", "\"progress\": [7, {"), kNodeFile)),
      "attempt-001/node-1.json: progress[0]: not an object");
  // A node record written before heartbeats were kept has no progress: none, not an error.
  auto old =
      NodeRecordFromJson(With(good, good.substr(good.find(", \"progress\"")), "}"), kNodeFile);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->progress.empty());
  // null is not an empty list.
  EXPECT_EQ(ErrorOf(NodeRecordFromJson(
                With(good, good.substr(good.find(", \"progress\"")), ", \"progress\": null}"),
                kNodeFile)),
            "attempt-001/node-1.json: progress: not an array");
}

TEST(RankRecordTest, TheKeptRecordsStatusStopAndInferenceRoundTrip) {
  RankRecord r = Rank(1);
  r.status = "stopping";
  r.stop_signal = 15;
  r.stop_time = 1700000090.5;
  r.state_at_stop = "T";
  r.inferred = true;
  r.note = "its wrapper was killed";
  const std::string good = RankRecordToJson(r);
  auto back = RankRecordFromJson(good, "attempt-001/rank-1.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->status, "stopping");
  EXPECT_EQ(back->stop_signal, 15);
  EXPECT_DOUBLE_EQ(back->stop_time, 1700000090.5);
  EXPECT_EQ(back->state_at_stop, "T");
  EXPECT_TRUE(back->inferred);
  EXPECT_EQ(back->note, "its wrapper was killed");
  EXPECT_EQ(
      ErrorOf(
          RankRecordFromJson(With(good, "\"stopping\"", "\"gone\""), "attempt-001/rank-1.json")),
      "attempt-001/rank-1.json: status: \"gone\" is not running, stopping, exited or missing");
  EXPECT_EQ(
      ErrorOf(RankRecordFromJson(With(good, "\"stop_signal\": 15", "\"stop_signal\": \"TERM\""),
                                 "attempt-001/rank-1.json")),
      "attempt-001/rank-1.json: stop_signal: not an integer");
  EXPECT_EQ(ErrorOf(RankRecordFromJson(With(good, "\"inferred\": true", "\"inferred\": 1"),
                                       "attempt-001/rank-1.json")),
            "attempt-001/rank-1.json: inferred: not true or false");
  // A record as the wrapper wrote it before it kept one from the start: exited, nothing inferred.
  std::string old = RankRecordToJson(Rank(1));
  old = old.substr(0, old.find(", \"status\"")) + "}";
  auto was = RankRecordFromJson(old, "attempt-001/rank-1.json");
  ASSERT_TRUE(was.ok()) << was.status().message();
  EXPECT_EQ(was->status, "exited");
  EXPECT_FALSE(was->inferred);
  EXPECT_TRUE(was->state_at_stop.empty());
}

TEST(RankRecordTest, ProcessStateReadsThisProcessAndNothingForAGoneOne) {
  EXPECT_EQ(ProcessState(::getpid()), "R");  // it is running: it reads its own stat
  EXPECT_EQ(ProcessState(0), "");
  EXPECT_EQ(ProcessState(std::numeric_limits<int>::max()), "");
  EXPECT_EQ(DescribeProcessState("T"), "process stopped (state T: a stop signal such as SIGSTOP)");
  EXPECT_EQ(DescribeProcessState(""), "process state unknown");
}

constexpr const char* kAttemptFile = "attempt-001/attempt.json";

TEST(AttemptAccountTest, ReadsTheTotalsOfAnEarlierAttemptStrictly) {
  const std::string good =
      R"({"attempt": 1, "start": 100.5, "end": 160.5, "seconds": 60.0, "outcome": "failed", "gpu_hours": 0.0333,)"
      R"( "gpu_hours_lost": 0.01, "decision": {}, "causes": [{"rank": 1, "cause": "killed by SIGKILL"}], "nodes": []})"
      "\n";
  auto a = AttemptAccountFromJson(good, kAttemptFile);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->attempt, 1);
  EXPECT_DOUBLE_EQ(a->start, 100.5);
  EXPECT_DOUBLE_EQ(a->end, 160.5);
  EXPECT_EQ(a->outcome, "failed");
  EXPECT_DOUBLE_EQ(a->gpu_hours, 0.0333);
  EXPECT_DOUBLE_EQ(a->gpu_hours_lost, 0.01);
  ASSERT_EQ(a->causes.size(), 1u);
  EXPECT_EQ(a->causes[0].cause, "killed by SIGKILL");
  EXPECT_EQ(a->json, good.substr(0, good.size() - 1));
  EXPECT_EQ(ErrorOf(AttemptAccountFromJson(With(good, "\"gpu_hours\": 0.0333,", ""), kAttemptFile)),
            "attempt-001/attempt.json: gpu_hours: missing");
  EXPECT_EQ(ErrorOf(AttemptAccountFromJson(With(good, "\"end\": 160.5", "\"end\": \"160\""),
                                           kAttemptFile)),
            "attempt-001/attempt.json: end: not a number");
  EXPECT_EQ(ErrorOf(AttemptAccountFromJson(With(good, "\"rank\": 1", "\"rank\": -1"), kAttemptFile))
                .rfind("attempt-001/attempt.json: causes[0].rank: ", 0),
            0u);
  EXPECT_EQ(ErrorOf(AttemptAccountFromJson(
                With(good, "\"gpu_hours_lost\": 0.01", "\"gpu_hours_lost\": -1"), kAttemptFile)),
            "attempt-001/attempt.json: gpu_hours: negative");
}

constexpr const char* kDecisionFile = "attempt-002/decision.json";

TEST(DecisionTest, RoundTrips) {
  Decision d{Action::kRestart, 0, "rank 3 exited 1; restarting from checkpoint step 40 after 30 s",
             3, 30};
  auto back = DecisionFromJson(DecisionToJson(2, d), kDecisionFile, 2);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->action, Action::kRestart);
  EXPECT_NE(DecisionToJson(2, d).find("\"action\": \"restart\""), std::string::npos);
  EXPECT_EQ(back->exit_code, 0);
  EXPECT_EQ(back->reason, d.reason);
  EXPECT_EQ(back->next_attempt, 3);
  EXPECT_DOUBLE_EQ(back->backoff_s, 30);
  auto stop = DecisionFromJson(
      DecisionToJson(2, {Action::kStop, kExitDoNotRequeue, "desync", 0, 0}), kDecisionFile, 2);
  ASSERT_TRUE(stop.ok()) << stop.status().message();
  EXPECT_EQ(stop->exit_code, 93);
  EXPECT_EQ(stop->action, Action::kStop);
  auto done =
      DecisionFromJson(DecisionToJson(2, {Action::kDone, 0, "final", 0, 0}), kDecisionFile, 2);
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->action, Action::kDone);
}

// These used to fall back: a missing exit_code became 70, a missing action "" (treated as stop),
// a missing backoff 0.
TEST(DecisionTest, AMissingOrMistypedFieldIsAnErrorNamingItAndTheFile) {
  const std::string good = DecisionToJson(2, {Action::kRestart, 0, "r", 3, 30});
  EXPECT_EQ(ErrorOf(DecisionFromJson(With(good, "\"exit_code\": 0, ", ""), kDecisionFile, 2)),
            "attempt-002/decision.json: exit_code: missing");
  EXPECT_EQ(
      ErrorOf(DecisionFromJson(With(good, "\"action\": \"restart\", ", ""), kDecisionFile, 2)),
      "attempt-002/decision.json: action: missing");
  EXPECT_EQ(ErrorOf(DecisionFromJson(With(good, "\"exit_code\": 0", "\"exit_code\": \"0\""),
                                     kDecisionFile, 2)),
            "attempt-002/decision.json: exit_code: not an integer");
  EXPECT_EQ(ErrorOf(DecisionFromJson(With(good, "\"backoff_s\": 30.0", "\"backoff_s\": \"30\""),
                                     kDecisionFile, 2)),
            "attempt-002/decision.json: backoff_s: not a number");
  EXPECT_EQ(ErrorOf(DecisionFromJson(With(good, "\"backoff_s\": 30.0", "\"backoff_s\": -1"),
                                     kDecisionFile, 2)),
            "attempt-002/decision.json: backoff_s: -1 is negative");
  EXPECT_EQ(ErrorOf(DecisionFromJson(With(good, "\"action\": \"restart\"", "\"action\": \"retry\""),
                                     kDecisionFile, 2)),
            "attempt-002/decision.json: action: \"retry\" is not done, restart or stop");
  EXPECT_EQ(ErrorOf(DecisionFromJson(With(good, "\"exit_code\": 0", "\"exit_code\": 300"),
                                     kDecisionFile, 2)),
            "attempt-002/decision.json: exit_code: 300 is out of range [0, 255]");
  EXPECT_EQ(ErrorOf(DecisionFromJson(good, kDecisionFile, 3)),
            "attempt-002/decision.json: attempt: 2, but the file is attempt 3's");
  EXPECT_EQ(ErrorOf(DecisionFromJson("{\"decision\": " + good + "}", kDecisionFile, 2)),
            "attempt-002/decision.json: attempt: missing");
}

constexpr const char* kResumeFile = "attempt-002/resume.json";

TEST(ResumeChoiceTest, RoundTrips) {
  ResumeChoice c{"/nfs/ckpt/step-00000010", 10, "0123456789abcdef",
                 "resuming from checkpoint step 10 (step-00000020: skipped: checksum mismatch)",
                 "weights"};
  auto back = ResumeChoiceFromJson(ResumeChoiceToJson(2, c), kResumeFile, 2);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->resume_from, c.resume_from);
  EXPECT_EQ(back->step, 10);
  EXPECT_EQ(back->manifest_xxh3, c.manifest_xxh3);
  EXPECT_EQ(back->where, c.where);
  EXPECT_EQ(back->resume_level, "weights");
  auto none = ResumeChoiceFromJson(ResumeChoiceToJson(2, ResumeChoice{}), kResumeFile, 2);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->resume_from, "none");
  EXPECT_EQ(none->step, -1);
  EXPECT_EQ(none->manifest_xxh3, "");
  EXPECT_EQ(none->resume_level, "");
}

// The other nodes hand their ranks exactly this: nothing in it may be guessed.
TEST(ResumeChoiceTest, AMissingMistypedOrInconsistentFieldIsAnErrorNamingItAndTheFile) {
  const std::string good =
      ResumeChoiceToJson(2, {"/c/step-00000010", 10, "0123456789abcdef", "w", "full"});
  EXPECT_EQ(ErrorOf(ResumeChoiceFromJson(With(good, "\"resume_from\": \"/c/step-00000010\", ", ""),
                                         kResumeFile, 2)),
            "attempt-002/resume.json: resume_from: missing");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(With(good, "\"step\": 10", "\"step\": \"10\""), kResumeFile, 2)),
      "attempt-002/resume.json: step: not an integer");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(With(good, "\"step\": 10", "\"step\": -1"), kResumeFile, 2)),
      "attempt-002/resume.json: step: -1 for the checkpoint /c/step-00000010");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(With(good, "\"0123456789abcdef\"", "\"xyz\""), kResumeFile, 2)),
      "attempt-002/resume.json: manifest_xxh3: \"xyz\" is not 16 hex digits");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(With(good, "\"/c/step-00000010\"", "\"\""), kResumeFile, 2)),
      "attempt-002/resume.json: resume_from: empty (a checkpoint directory or \"none\")");
  const std::string none = ResumeChoiceToJson(2, ResumeChoice{});
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(With(none, "\"step\": -1", "\"step\": 4"), kResumeFile, 2)),
      "attempt-002/resume.json: step: 4 with resume_from \"none\"");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(
          With(good, "\"resume_level\": \"full\"", "\"resume_level\": \"opt\""), kResumeFile, 2)),
      "attempt-002/resume.json: resume_level: \"opt\" (full, weights)");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(
          With(good, "\"resume_level\": \"full\"", "\"resume_level\": null"), kResumeFile, 2)),
      "attempt-002/resume.json: resume_level: null for the checkpoint /c/step-00000010");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(With(good, ", \"resume_level\": \"full\"", ""), kResumeFile, 2)),
      "attempt-002/resume.json: resume_level: missing");
  EXPECT_EQ(ErrorOf(ResumeChoiceFromJson(
                With(good, "\"resume_level\": \"full\"", "\"resume_level\": 1"), kResumeFile, 2)),
            "attempt-002/resume.json: resume_level: not a string");
  EXPECT_EQ(
      ErrorOf(ResumeChoiceFromJson(
          With(none, "\"resume_level\": null", "\"resume_level\": \"full\""), kResumeFile, 2)),
      "attempt-002/resume.json: resume_level: set with resume_from \"none\"");
  EXPECT_EQ(ErrorOf(ResumeChoiceFromJson(good, kResumeFile, 3)),
            "attempt-002/resume.json: attempt: 2, but the file is attempt 3's");
}

constexpr const char* kVerdictFile = "gate/verdict.json";

TEST(GateVerdictTest, RoundTrips) {
  GateVerdict v{gate::Verdict::kFail,         true,           3,
                "data: rank 3 has no blocks", "gate: FAIL\n", {{0, "aa11"}, {1, "bb22"}}};
  auto back = GateVerdictFromJson(GateVerdictToJson(v), kVerdictFile);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->overall, gate::Verdict::kFail);
  EXPECT_NE(GateVerdictToJson(v).find("\"overall\": \"FAIL\""), std::string::npos);
  EXPECT_TRUE(back->accepted);
  EXPECT_EQ(back->first_attempt, 3);
  EXPECT_EQ(back->reasons, v.reasons);
  EXPECT_EQ(back->text, v.text);
  EXPECT_EQ(back->parts, v.parts);
  // The one-node verdict as earlier launchers wrote it: no reasons, no text, no parts.
  auto one = GateVerdictFromJson(
      R"({"overall": "PASS", "accepted": false, "first_attempt": 1, "parts": {}})", kVerdictFile);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->overall, gate::Verdict::kPass);
  EXPECT_TRUE(one->reasons.empty());
  EXPECT_TRUE(one->parts.empty());
}

// "accepted" missing used to mean false and "first_attempt" missing 1; a bad part's nonce was "".
TEST(GateVerdictTest, AMissingMistypedOrMisnestedFieldIsAnErrorNamingIt) {
  const std::string good =
      GateVerdictToJson({gate::Verdict::kPass, false, 1, "", "", {{0, "aa11"}, {1, "bb22"}}});
  EXPECT_EQ(ErrorOf(GateVerdictFromJson(With(good, "\"accepted\": false, ", ""), kVerdictFile)),
            "gate/verdict.json: accepted: missing");
  EXPECT_EQ(ErrorOf(GateVerdictFromJson(
                With(good, "\"first_attempt\": 1", "\"first_attempt\": \"1\""), kVerdictFile)),
            "gate/verdict.json: first_attempt: not an integer");
  EXPECT_EQ(ErrorOf(GateVerdictFromJson(With(good, "\"first_attempt\": 1", "\"first_attempt\": 0"),
                                        kVerdictFile)),
            "gate/verdict.json: first_attempt: 0 is out of range [1, 2147483647]");
  EXPECT_EQ(ErrorOf(GateVerdictFromJson(With(good, "\"overall\": \"PASS\"", "\"overall\": \"OK\""),
                                        kVerdictFile)),
            "gate/verdict.json: overall: \"OK\" is not PASS, WARN or FAIL");
  EXPECT_EQ(ErrorOf(GateVerdictFromJson(With(good, "\"reasons\": \"\"", "\"reasons\": []"),
                                        kVerdictFile)),
            "gate/verdict.json: reasons: not a string");
  EXPECT_EQ(ErrorOf(GateVerdictFromJson(With(good, "\"1\": \"bb22\"", "\"1\": 22"), kVerdictFile)),
            "gate/verdict.json: parts.1: not a string");
  EXPECT_EQ(
      ErrorOf(GateVerdictFromJson(With(good, "\"1\": \"bb22\"", "\"n1\": \"bb22\""), kVerdictFile)),
      "gate/verdict.json: parts.n1: the key is not a node number");
  EXPECT_EQ(
      ErrorOf(GateVerdictFromJson(
          With(good, "{\"0\": \"aa11\", \"1\": \"bb22\"}", "[\"aa11\", \"bb22\"]"), kVerdictFile)),
      "gate/verdict.json: parts: not an object");
}

TEST(GateVerdictTest, APartsNonceIsRequired) {
  auto nonce =
      GatePartNonce(R"({"launch_nonce": "0123abcd", "overall": "PASS"})", "gate/node-1.json");
  ASSERT_TRUE(nonce.ok()) << nonce.status().message();
  EXPECT_EQ(*nonce, "0123abcd");
  EXPECT_EQ(ErrorOf(GatePartNonce(R"({"overall": "PASS"})", "gate/node-1.json")),
            "gate/node-1.json: launch_nonce: missing");
  EXPECT_EQ(ErrorOf(GatePartNonce(R"({"launch_nonce": 7})", "gate/node-1.json")),
            "gate/node-1.json: launch_nonce: not a string");
}

constexpr const char* kSummary =
    R"({"run": "sft", "run_file": {"path": "/r/run.toml", "xxh3": "0123456789abcdef"},
  "run_id": "x", "nodes": 1, "world": 2, "outcome": "completed", "exit_code": 0, "steps": 60, "planned_steps": 60,
  "tokens": 491520, "tokens_per_s": 1234.5, "final_checkpoint": "/c/step-00000060", "attempts": 2,
  "gpu_hours_used": 0.0123, "gpu_hours_lost": 0.0012, "evenfix_dropped_blocks": 0, "launch_dir": "/c/launch/x",
  "evenkeel_version": "0.1.0", "attempt_records": []})";

TEST(LaunchSummaryTest, ReadsWhatLaunchPrints) {
  auto s = LaunchSummaryFromJson(kSummary, "/c/launch/x/summary.json");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->outcome, "completed");
  EXPECT_EQ(s->steps, 60);
  EXPECT_EQ(s->planned_steps, 60);
  EXPECT_EQ(s->tokens, 491520u);
  EXPECT_DOUBLE_EQ(s->tokens_per_s, 1234.5);
  EXPECT_EQ(s->attempts, 2);
  EXPECT_DOUBLE_EQ(s->gpu_hours_used, 0.0123);
  EXPECT_EQ(s->evenfix_dropped_blocks, 0);
  EXPECT_EQ(s->final_checkpoint, "/c/step-00000060");
  // No plan, no checkpoint: -1s.
  auto none = LaunchSummaryFromJson(With(With(kSummary, "\"steps\": 60", "\"steps\": -1"),
                                         "\"planned_steps\": 60", "\"planned_steps\": -1"),
                                    "s.json");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(none->steps, -1);
}

// `evenkeel launch` used to print nothing at all for a summary it could not read.
TEST(LaunchSummaryTest, ABadSummaryIsAnErrorNamingTheFieldAndTheFile) {
  const std::string name = "/c/launch/x/summary.json";
  EXPECT_EQ(
      ErrorOf(LaunchSummaryFromJson(With(kSummary, "\"outcome\": \"completed\", ", ""), name)),
      "/c/launch/x/summary.json: outcome: missing");
  EXPECT_EQ(
      ErrorOf(LaunchSummaryFromJson(With(kSummary, "\"tokens\": 491520", "\"tokens\": -5"), name)),
      "/c/launch/x/summary.json: tokens: not a non-negative integer");
  EXPECT_EQ(ErrorOf(LaunchSummaryFromJson(
                With(kSummary, "\"gpu_hours_lost\": 0.0012", "\"gpu_hours_lost\": null"), name)),
            "/c/launch/x/summary.json: gpu_hours_lost: not a number");
  EXPECT_EQ(ErrorOf(LaunchSummaryFromJson("{\"summary\": " + std::string(kSummary) + "}", name)),
            "/c/launch/x/summary.json: outcome: missing");
  std::string bad = ErrorOf(LaunchSummaryFromJson("{\"outcome\": ", name));
  EXPECT_EQ(bad.rfind("/c/launch/x/summary.json: malformed JSON: ", 0), 0u) << bad;
}

// The bytes of each record, pinned: other launchers (and versions) read them.
TEST(RecordBytesTest, EachRecordIsWrittenAsDocumented) {
  Decision d;
  d.action = Action::kRestart;
  d.exit_code = 1;
  d.reason = "r \"q\"";
  d.next_attempt = 3;
  d.backoff_s = 2.5;
  EXPECT_EQ(
      DecisionToJson(2, d),
      "{\"attempt\": 2, \"action\": \"restart\", \"exit_code\": 1, \"reason\": \"r \\\"q\\\"\", "
      "\"next_attempt\": 3, \"backoff_s\": 2.5}\n");
  ResumeChoice c;
  c.where = "w";
  EXPECT_EQ(ResumeChoiceToJson(1, c),
            "{\"attempt\": 1, \"resume_from\": \"none\", \"step\": -1, \"manifest_xxh3\": \"\", "
            "\"where\": \"w\", \"resume_level\": null}\n");
  c = {"/c/step-00000010", 10, "0123456789abcdef", "w", "full"};
  EXPECT_NE(ResumeChoiceToJson(1, c).find("\"where\": \"w\", \"resume_level\": \"full\"}"),
            std::string::npos);
  GateVerdict v;
  v.overall = gate::Verdict::kWarn;
  v.text = "t";
  EXPECT_EQ(GateVerdictToJson(v),
            "{\"overall\": \"WARN\", \"accepted\": false, \"first_attempt\": 1, \"reasons\": \"\", "
            "\"text\": \"t\", \"parts\": {}}\n");
  v.parts = {{0, "a"}, {1, "b"}};
  EXPECT_NE(GateVerdictToJson(v).find("\"parts\": {\"0\": \"a\", \"1\": \"b\"}}\n"),
            std::string::npos);
  NodeRecord n;
  n.node = 1;
  n.host = "n1";
  n.start = 1;
  n.end = 2.5;
  n.cancelled = true;
  n.step_reached = 7;
  n.causes = {{3, "x"}};
  n.progress = {{3, 7, "save", 8, 9.25, 42}};
  EXPECT_EQ(NodeRecordToJson(n),
            "{\"node\": 1, \"host\": \"n1\", \"start\": 1.000, \"end\": 2.500, \"torchrun\": "
            "{\"exit_code\": -1, "
            "\"signal\": 0}, \"cancelled\": true, \"step_reached\": 7, \"error\": \"\", \"ranks\": "
            "[], \"causes\": "
            "[{\"rank\": 3, \"cause\": \"x\"}], \"progress\": [{\"rank\": 3, \"step\": 7, "
            "\"phase\": \"save\", "
            "\"phase_step\": 8, \"time\": 9.250, \"pid\": 42}]}\n");
  RankRecord r;
  r.rank = 5;
  r.local_rank = 1;
  r.node_rank = 2;
  r.host = "h";
  r.pid = 99;
  r.start = 1.5;
  r.end = 2;
  r.exit_code = 0;
  r.signal = 9;
  r.log = "l";
  r.status = "exited";
  r.stop_signal = 15;
  r.stop_time = 3;
  r.state_at_stop = "S";
  r.inferred = true;
  r.note = "n";
  EXPECT_EQ(
      RankRecordToJson(r),
      "{\"rank\": 5, \"local_rank\": 1, \"node_rank\": 2, \"host\": \"h\", \"pid\": 99, \"start\": "
      "1.500, "
      "\"end\": 2.000, \"exit_code\": 0, \"signal\": 9, \"log\": \"l\", \"status\": \"exited\", "
      "\"stop_signal\": 15, "
      "\"stop_time\": 3.000, \"state_at_stop\": \"S\", \"inferred\": true, \"note\": \"n\"}\n");
  n.ranks = {Rank(0), Rank(1)};
  const std::string j = NodeRecordToJson(n);
  EXPECT_NE(
      j.find("\"ranks\": [" +
             RankRecordToJson(Rank(0)).substr(0, RankRecordToJson(Rank(0)).size() - 1) + ", {"),
      std::string::npos)
      << j;
}

}  // namespace
}  // namespace ek::launch
