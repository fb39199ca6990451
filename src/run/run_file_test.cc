#include "run/run_file.h"

#include <gtest/gtest.h>

#include "run/pack_sources.h"

namespace ek::run {
namespace {

TEST(RunFileTest, ParsesEverySection) {
  auto r = ParseRunFile(R"(
[run]
name = "qwen3-32b-sft"
[cluster]
nodes = 2
gpus_per_node = 8
hosts = ["b300-a", "b300-b"]
[data]
pack_dir = "pack"
[model]
params = 32.76e9
[train]
seq_len = 2048
micro_batch = 1
grad_accum = 8
epochs = 1
warmup_steps = 100
save_every = 500
[checkpoint]
dir = "/nfs/ckpt"
keep = 3
[evenfix]
mode = "pad"
[distributed]
watchdog_timeout_min = 30
[gpu]
memory_gb = 275
)",
                        "/runs/run.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->world(), 16);
  EXPECT_EQ(r->evenfix, EvenfixMode::kPad);
  EXPECT_EQ(r->hosts.size(), 2u);
  EXPECT_DOUBLE_EQ(r->params, 32.76e9);
  EXPECT_EQ(r->Resolve(r->pack_dir), "/runs/pack");
  EXPECT_EQ(r->cache_dir, "pack");
}

TEST(RunFileTest, NonAsciiWhereTomlppWouldHitUndefinedBehaviourIsAnError) {
  // Regression (fuzz_run_file): toml++ 3.3 reached TOML_UNREACHABLE testing
  // these code points for whitespace (UBSan: "execution reached an
  // unreachable program point"); they are refused before it sees them.
  auto out = ParseRunFile("[run]\nname = \"r\"\n\xc2\xa1 = 1\n", "run.toml");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "run.toml: line 3: a non-ASCII character outside a string or comment");
  auto junk = ParseRunFile("_s = 1'=aaaa\xcd\x93k\n",
                           "run.toml");  // a quote inside a bad value starts no string
  ASSERT_FALSE(junk.ok());
  EXPECT_EQ(junk.status().message(),
            "run.toml: line 1: a non-ASCII character outside a string or comment");
  // fuzz_run_file in CI: a quote after a second = or after a number's point is junk of a bad
  // value to toml++, not a string.
  for (const char* junk_value :
       {"_s =11='23Jk\xc3\xa9'\n", "a = 1.'\xc3\xa9'\n", "a = [1, 2.'\xc3\xa9']\n",
        "a = {b = 1.'\xc3\xa9'}\n", "i=0f[\"\xef\xb9\xbf\n"}) {
    auto j = ParseRunFile(junk_value, "run.toml");
    ASSERT_FALSE(j.ok()) << junk_value;
    EXPECT_EQ(j.status().message(),
              "run.toml: line 1: a non-ASCII character outside a string or comment")
        << junk_value;
  }
  // fuzz_run_file: a float where an integer goes is a type error, never cast (toml++ casts
  // 1e308 to int64 unchecked).
  for (const char* big : {"[cluster]\ngpus_per_node = 1e308\n", "[data]\nmixture_seed = -1e300\n",
                          "[[data.source]]\npath = \"a\"\nepochs = 1e308\n"}) {
    auto b = ParseRunFile(big, "run.toml");
    ASSERT_FALSE(b.ok()) << big;
    EXPECT_NE(b.status().message().find(" must be "), std::string::npos) << b.status().message();
  }
  auto spaced = ParseRunFile("s = \"\"\"\\ \xef\xbb\xaf\"\"\"\n", "run.toml");  // fuzz_run_file
  ASSERT_FALSE(spaced.ok());
  EXPECT_EQ(
      spaced.status().message(),
      "run.toml: line 1: a non-ASCII character after a backslash in a string (not an escape)");
  auto cont = ParseRunFile("[run]\nname = \"\"\"\\\n  \xc2\xa7\"\"\"\n", "run.toml");
  ASSERT_FALSE(cont.ok());
  EXPECT_EQ(cont.status().message(),
            "run.toml: line 3: a non-ASCII character after a line-ending backslash in a \"\"\" "
            "string (not supported)");
  auto esc =
      ParseRunFile("s = \"\"\"\n\\\xc2\xa7\"\"\"\n", "run.toml");  // fuzz_run_file, in CI's 3 s
  ASSERT_FALSE(esc.ok());
  EXPECT_EQ(
      esc.status().message(),
      "run.toml: line 2: a non-ASCII character after a backslash in a string (not an escape)");
  // Non-ASCII where TOML allows it still reads: strings of every kind, quoted keys, comments, a
  // BOM.
  auto ok = ParseRunFile(
      "\xef\xbb\xbf# caf\xc3\xa9\n[run]  # \xc3\xa9\nname = \"caf\xc3\xa9 \\\"\xc2\xa1\\\" \"\n"
      "[train]\n\"lr\" = 3e-4\n[data]\npack_dir = '\xc2\xa1p'\n"
      "[model]\nparams = 1e9\npath = \"\"\"m\xc2\xa1\"\"\"\"\"\n",
      "run.toml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  // Quoted keys after a dot, in headers, arrays of tables and inline tables still read (the
  // keys are unknown, which is the error).
  for (const char* quoted :
       {"[run.'\xc3\xa9']\n", "[[run.'\xc3\xa9']]\n", "run.'\xc3\xa9' = 2\n",
        "[run]\nname = {'\xc3\xa9' = 1}\n", "[run]\nname = ['x', '\xc3\xa9']\n"}) {
    auto q = ParseRunFile(quoted, "run.toml");
    ASSERT_FALSE(q.ok()) << quoted;
    EXPECT_EQ(q.status().message().find("non-ASCII"), std::string::npos)
        << quoted << ": " << q.status().message();
  }
  EXPECT_EQ(ok->name, "caf\xc3\xa9 \"\xc2\xa1\" ");
  EXPECT_EQ(ok->pack_dir, "\xc2\xa1p");
}

TEST(RunFileTest, UnknownKeysAreNamed) {
  auto r = ParseRunFile("[train]\nseq_len = 2048\nmicro_bach = 1\n", "run.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key train.micro_bach (line 3)"), std::string::npos)
      << r.status().message();
  auto t = ParseRunFile("[trian]\n", "run.toml");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown key trian"), std::string::npos);
}

TEST(RunFileTest, WrongTypesAreNamed) {
  auto r = ParseRunFile("[cluster]\nnodes = \"two\"\n", "run.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cluster.nodes (line 2) must be an integer"),
            std::string::npos)
      << r.status().message();
  auto m = ParseRunFile("[evenfix]\nmode = \"maybe\"\n", "run.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("evenfix.mode"), std::string::npos);
  auto s = ParseRunFile("[train\n", "run.toml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("run.toml: line 1"), std::string::npos)
      << s.status().message();
}

TEST(RunFileTest, CrossFieldChecks) {
  auto r = ParseRunFile("[cluster]\nnodes = 2\nhosts = [\"a\"]\n", "run.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hosts"), std::string::npos);
}

TEST(RunFileTest, WatchAndAlertTables) {
  auto r = ParseRunFile(R"(
[watch]
poll_s = 0.5
heartbeat_dir = "/run/evenkeel/hb"
profile = "H100"
final_step = 3854
agent_timeout_s = 1.5
state_dir = "watch-state"
[alert]
alertmanager_url = "http://127.0.0.1:9093"
webhook_url = "http://hooks.example/T0"
command = "logger -t evenkeel"
backoff_s = 0.5
backoff_max_s = 30
resend_s = 45
)",
                        "run.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->watch_poll_s, 0.5);
  EXPECT_EQ(r->heartbeat_dir, "/run/evenkeel/hb");
  EXPECT_EQ(r->watch_profile, "H100");
  EXPECT_EQ(r->final_step, 3854);
  EXPECT_EQ(r->watch_state_dir, "watch-state");
  EXPECT_EQ(r->alertmanager_url, "http://127.0.0.1:9093");
  EXPECT_EQ(r->alert_command, "logger -t evenkeel");
  EXPECT_DOUBLE_EQ(r->alert_resend_s, 45);
  auto bad = ParseRunFile("[alert]\nslack = \"x\"\n", "run.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown key alert.slack"), std::string::npos);
  auto zero = ParseRunFile("[watch]\npoll_s = 0\n", "run.toml");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("watch.poll_s"), std::string::npos);
  auto backoff = ParseRunFile("[alert]\nbackoff_s = 10\nbackoff_max_s = 5\n", "run.toml");
  EXPECT_FALSE(backoff.ok());
}

}  // namespace
}  // namespace ek::run

namespace ek::run {
namespace {

TEST(RunFileTest, TrainerKeysAndIdentity) {
  const char* text = R"([model]
path = "models/tiny"
[train]
lr = 3e-4
weight_decay = 0.1
min_lr_ratio = 0.1
seed = 7
shuffle = false
precision = "bf16"
max_steps = 40
[checkpoint]
dir = "ckpt"
shard_size_gb = 0.5
)";
  auto r = ParseRunFile(text, "/runs/run.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->ConfigPath(), "/runs/models/tiny/config.json");
  EXPECT_DOUBLE_EQ(r->lr, 3e-4);
  EXPECT_EQ(r->seed, 7);
  EXPECT_FALSE(r->shuffle);
  EXPECT_EQ(r->max_steps, 40);
  EXPECT_NE(r->xxh3, 0u);
  auto again = ParseRunFile(std::string(text) + "\n", "/runs/run.toml");
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->xxh3, r->xxh3) << "the identity is the bytes";
  std::string json = RunFileToJson(*r);
  EXPECT_NE(json.find("\"train\": {\"seq_len\": 2048"), std::string::npos) << json;
  EXPECT_NE(json.find("\"path\": \"/runs/models/tiny\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"dir\": \"/runs/ckpt\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"shuffle\": false"), std::string::npos) << json;
  EXPECT_NE(json.find("\"mode\": \"min\""), std::string::npos) << json;
}

TEST(RunFileTest, BadTrainerValuesAreRefused) {
  for (const char* bad :
       {"[train]\nprecision = \"fp8\"\n", "[train]\nlr = 0\n", "[train]\nmin_lr_ratio = 2.0\n",
        "[checkpoint]\nshard_size_gb = 0\n", "[train]\nmax_steps = -1\n", "[train]\nlr = nan\n",
        "[train]\nseq_len = 99999999999\n"}) {
    auto r = ParseRunFile(bad, "run.toml");
    EXPECT_FALSE(r.ok()) << bad;
  }
  auto m = ParseRunFile("[evenfix]\nmode = \"maybe\"\n", "run.toml");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("evenfix.mode (line 2)"), std::string::npos)
      << m.status().message();
}

TEST(RunFileTest, EvenfixMaxDropPct) {
  auto def = ParseRunFile("[run]\nname = \"x\"\n", "run.toml");
  ASSERT_TRUE(def.ok()) << def.status().message();
  EXPECT_DOUBLE_EQ(def->evenfix_max_drop_pct, 1.0);
  EXPECT_NE(RunFileToJson(*def).find("\"max_drop_pct\": 1"), std::string::npos)
      << RunFileToJson(*def);
  auto set = ParseRunFile("[evenfix]\nmode = \"min\"\nmax_drop_pct = 0.25\n", "run.toml");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_DOUBLE_EQ(set->evenfix_max_drop_pct, 0.25);
  auto over = ParseRunFile("[evenfix]\nmode = \"min\"\nmax_drop_pct = 150\n", "run.toml");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "run.toml: evenfix.max_drop_pct (line 3) must be a number in [0, 100], not 150");
  auto neg = ParseRunFile("[evenfix]\nmax_drop_pct = -1\n", "run.toml");
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().message(),
            "run.toml: evenfix.max_drop_pct (line 2) must be a number in [0, 100], not -1");
  auto type = ParseRunFile("[evenfix]\nmax_drop_pct = \"1%\"\n", "run.toml");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.status().message(), "run.toml: evenfix.max_drop_pct (line 2) must be a number");
  // Built from flags, the cross-field check refuses it too.
  RunFile r;
  r.evenfix_max_drop_pct = 101;
  EXPECT_EQ(ValidateRunFile(r).message(), "run: evenfix.max_drop_pct must be in [0, 100]");
}

// --set: a run-file key given on the command line, read by the file's own reader.
constexpr const char* kSmall = "[train]\nlr = 1e-5\ngrad_accum = 8\n[checkpoint]\ndir = \"ckpt\"\n";

Result<RunFile> WithSet(std::vector<std::string> overrides) {
  return ParseRunFile(kSmall, "/runs/run.toml", overrides);
}

TEST(RunFileSetTest, AGoodValueOverridesTheFileAndIsRecorded) {
  auto r = WithSet({"train.lr=2e-5", "train.grad_accum=4", "checkpoint.dir=/nfs/ckpt",
                    "evenfix.mode=off", "train.shuffle=false", "run.name=\"sft 1\"",
                    "cluster.hosts=[\"a\", \"b\"]", "cluster.nodes=2"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->lr, 2e-5);
  EXPECT_EQ(r->grad_accum, 4);
  EXPECT_EQ(r->checkpoint_dir, "/nfs/ckpt");  // a path needs no quotes
  EXPECT_EQ(r->evenfix, EvenfixMode::kOff);
  EXPECT_FALSE(r->shuffle);
  EXPECT_EQ(r->name, "sft 1");
  EXPECT_EQ(r->hosts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->overrides.size(), 8u);
  const std::string json = RunFileToJson(*r);
  EXPECT_NE(json.find("\"overrides\": [\"train.lr=2e-5\", "), std::string::npos) << json;
  EXPECT_NE(json.find("\"lr\": 2e-05"), std::string::npos) << json;
  // The identity stays the file's bytes: the same file without overrides has the same xxh3.
  auto plain = ParseRunFile(kSmall, "/runs/run.toml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(r->xxh3, plain->xxh3);
  EXPECT_NE(RunFileToJson(*plain).find("\"overrides\": []"), std::string::npos);
  // The last of two wins, as a later key would.
  auto twice = WithSet({"train.lr=2e-5", "train.lr=3e-5"});
  ASSERT_TRUE(twice.ok());
  EXPECT_DOUBLE_EQ(twice->lr, 3e-5);
  // A non-ASCII word is a string; toml++ never sees it outside quotes.
  auto word = WithSet({"run.name=d\xc3\xa9j\xc3\xa0"});
  ASSERT_TRUE(word.ok()) << word.status().message();
  EXPECT_EQ(word->name, "d\xc3\xa9j\xc3\xa0");
}

TEST(RunFileSetTest, AnUnknownKeyIsTheFilesErrorNamingTheOverride) {
  auto r = WithSet({"train.lrr=2e-5"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "/runs/run.toml: unknown key train.lrr (--set train.lrr=2e-5)");
  auto section = WithSet({"trian.lr=2e-5"});
  ASSERT_FALSE(section.ok());
  EXPECT_EQ(section.status().message(),
            "/runs/run.toml: unknown key trian.lr (--set trian.lr=2e-5)");
}

TEST(RunFileSetTest, AWrongTypeIsTheFilesErrorNamingTheOverride) {
  auto lr = WithSet({"train.lr=fast"});
  ASSERT_FALSE(lr.ok());
  EXPECT_EQ(lr.status().message(),
            "/runs/run.toml: train.lr (--set train.lr=fast) must be a number");
  auto accum = WithSet({"train.grad_accum=2.5"});
  ASSERT_FALSE(accum.ok());
  EXPECT_EQ(accum.status().message(),
            "/runs/run.toml: train.grad_accum (--set train.grad_accum=2.5) must be an integer");
  auto name = WithSet({"run.name=123"});  // an integer, as `name = 123` in the file
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.status().message(),
            "/runs/run.toml: run.name (--set run.name=123) must be a string");
  auto flag = WithSet({"train.shuffle=yes"});
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.status().message(),
            "/runs/run.toml: train.shuffle (--set train.shuffle=yes) must be true or false");
  auto mode = WithSet({"evenfix.mode=maybe"});
  ASSERT_FALSE(mode.ok());
  EXPECT_EQ(mode.status().message(),
            "/runs/run.toml: evenfix.mode (--set evenfix.mode=maybe): evenfix mode 'maybe' (min, "
            "pad, off)");
  auto range = WithSet({"evenfix.max_drop_pct=150"});
  ASSERT_FALSE(range.ok());
  EXPECT_EQ(range.status().message(),
            "/runs/run.toml: evenfix.max_drop_pct (--set evenfix.max_drop_pct=150) must be a "
            "number in [0, 100], not 150");
  // A value of the right type that the cross-field check refuses names the overrides too.
  auto negative = WithSet({"train.lr=-1"});
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "/runs/run.toml: train.lr must be positive (with --set train.lr=-1)");
}

TEST(RunFileSetTest, AMalformedOverrideIsAnErrorNamingIt) {
  for (const char* bad : {"train.lr", "lr=2e-5", "=2e-5", ".lr=1", "train.=1"}) {
    auto r = WithSet({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), std::string("/runs/run.toml: --set ") + bad +
                                        ": not section.key=value (e.g. --set train.lr=2e-5)");
  }
  // A line break cannot smuggle a second key (or section) in.
  auto two = WithSet({"train.lr=1e-5\n[cluster]\nnodes = 4"});
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().message(),
            "/runs/run.toml: train.lr (--set train.lr=1e-5\n[cluster]\nnodes = 4): the value has a "
            "line break");
  // A value that is more than one TOML value is not one: a string, refused for a number.
  auto extra = WithSet({"train.lr=1e-5 w = 2"});
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().message(),
            "/runs/run.toml: train.lr (--set train.lr=1e-5 w = 2) must be a number");
}

TEST(RunFileDataTest, SourcesAndThePacksKeysAreRead) {
  auto r = ParseRunFile(R"(
[data]
pack_dir = "pack"
shard = "contiguous"
chat_template = "chatml"
loss_mask = "assistant"
mixture_seed = 7

[[data.source]]
name = "chat"
path = "data/chat-*.jsonl"
shape = "sharegpt"
columns = { messages = "conversations" }
tags = { role_tag = "from", content_tag = "value", user_tag = "human" }
weight = 0.7

[[data.source]]
path = "hub/ds"
format = "datasets"
split = "train"
text_field = "body"
weight = 0.3
)",
                        "/runs/run.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->shard, "contiguous");
  EXPECT_EQ(r->chat_template, "chatml");
  EXPECT_EQ(r->loss_mask, "assistant");
  EXPECT_EQ(r->mixture_seed, 7);
  ASSERT_EQ(r->sources.size(), 2u);
  const DataSource& a = r->sources[0];
  EXPECT_EQ(a.name, "chat");
  EXPECT_EQ(a.path, "data/chat-*.jsonl");
  EXPECT_EQ(a.format, "auto");
  EXPECT_EQ(a.shape, "sharegpt");
  EXPECT_DOUBLE_EQ(a.weight, 0.7);
  EXPECT_EQ(a.epochs, 0);
  EXPECT_EQ(a.line, 9);
  using Map = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(a.columns, (Map{{"messages", "conversations"}}));
  EXPECT_EQ(a.tags, (Map{{"role_tag", "from"}, {"content_tag", "value"}, {"user_tag", "human"}}));
  const DataSource& b = r->sources[1];
  EXPECT_EQ(b.format, "datasets");
  EXPECT_EQ(b.split, "train");
  EXPECT_EQ(b.text_field, "body");
  const std::string json = RunFileToJson(*r);
  EXPECT_NE(json.find(R"("path": "/runs/data/chat-*.jsonl")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("columns": {"messages": "conversations"})"), std::string::npos) << json;
}

TEST(RunFileDataTest, AttentionIsIsolatedByDefaultAndOnlyIsolatedOrCross) {
  auto def = ParseRunFile("[data]\npack_dir = \"pack\"\n", "run.toml");
  ASSERT_TRUE(def.ok()) << def.status().message();
  EXPECT_EQ(def->attention, "isolated");
  auto cross = ParseRunFile("[data]\nattention = \"cross\"\n", "run.toml");
  ASSERT_TRUE(cross.ok()) << cross.status().message();
  EXPECT_EQ(cross->attention, "cross");
  auto bad = ParseRunFile("[data]\nattention = \"flash\"\n", "run.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "run.toml: data.attention 'flash' (isolated, cross)");
  auto typed = ParseRunFile("[data]\nattention = 1\n", "run.toml");
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("data.attention (line 2) must be a string"),
            std::string::npos)
      << typed.status().message();
}

TEST(RunFileCheckpointTest, ResumeIsFullByDefaultAndOnlyFullOrWeights) {
  auto def = ParseRunFile("[checkpoint]\nkeep = 3\n", "run.toml");
  ASSERT_TRUE(def.ok()) << def.status().message();
  EXPECT_EQ(def->resume, "full");
  EXPECT_NE(RunFileToJson(*def).find(R"("resume": "full")"), std::string::npos);
  auto weights = ParseRunFile("[checkpoint]\nresume = \"weights\"\n", "run.toml");
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  EXPECT_EQ(weights->resume, "weights");
  EXPECT_NE(RunFileToJson(*weights).find(R"("resume": "weights")"), std::string::npos);
  auto bad = ParseRunFile("[checkpoint]\nresume = \"optimizer\"\n", "run.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "run.toml: checkpoint.resume 'optimizer' (full, weights)");
  auto typed = ParseRunFile("[checkpoint]\nresume = true\n", "run.toml");
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("checkpoint.resume (line 2) must be a string"),
            std::string::npos)
      << typed.status().message();
  auto misspelt = ParseRunFile("[checkpoint]\nresum = \"full\"\n", "run.toml");
  ASSERT_FALSE(misspelt.ok());
  EXPECT_NE(misspelt.status().message().find("unknown key checkpoint.resum"), std::string::npos)
      << misspelt.status().message();
}

TEST(RunFileDataTest, BadSourcesAreNamed) {
  auto err = [](const std::string& toml) {
    auto r = ParseRunFile(toml, "run.toml");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(err("[[data.source]]\npath = \"a.jsonl\"\nwieght = 1\n"),
            "run.toml: unknown key data.source[0].wieght (line 3); a source has name, path, "
            "format, split, shape, text_field, columns, tags, weight, epochs");
  EXPECT_EQ(err("[[data.source]]\nname = \"a\"\n"),
            "run.toml: data.source[0] (line 1) has no path");
  EXPECT_EQ(err("[[data.source]]\npath = \"a\"\nweight = -1\n"),
            "run.toml: data.source[0].weight (line 3) must be a positive number");
  EXPECT_EQ(err("[[data.source]]\npath = \"a\"\nepochs = 1.5\n"),
            "run.toml: data.source[0].epochs (line 3) must be a whole number of passes (>= 1)");
  EXPECT_EQ(err("[[data.source]]\npath = \"a\"\nweight = 1\nepochs = 2\n"),
            "run.toml: data.source[0] (line 1) has both weight and epochs: a source takes a share "
            "of the tokens (weight) or whole passes (epochs), not both");
  EXPECT_EQ(err("[[data.source]]\npath = \"a\"\ncolumns = { messages = 3 }\n"),
            "run.toml: data.source[0].columns.messages (line 3) must be a string");
  EXPECT_EQ(err("[data]\nsource = \"a.jsonl\"\n"),
            "run.toml: data.source (line 2) must be an array of tables: one [[data.source]] per "
            "source");
  EXPECT_EQ(err("[[data.source]]\npath = \"a\"\nweight = 1\n[[data.source]]\npath = \"b\"\n"),
            "run.toml: data.source[1] (line 4) has no weight and data.source[0] (line 1) has one: "
            "give every source a weight (shares of the tokens) or none (each source in whole "
            "passes, epochs = 1 by default)");
  EXPECT_EQ(
      err("[data]\nshard = \"round-robin\"\n"),
      "run.toml: data.shard: unknown shard mode 'round-robin' (contiguous, strided, balanced)");
  auto set = ParseRunFile("[run]\n", "run.toml", {"data.source.path=x"});
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(),
            "run.toml: --set data.source.path=x: the sources are [[data.source]] tables of the "
            "file, not set one key at a time");
}

TEST(PackSourcesTest, APackIsComparedWithTheRunFilesSources) {
  auto r = ParseRunFile(
      "[data]\nmixture_seed = 4\n[[data.source]]\npath = \"d/web.jsonl\"\nweight = 3\n"
      "[[data.source]]\nname = \"books\"\npath = \"b\"\nweight = 1\n",
      "run.toml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(SourceName(r->sources[0]), "web.jsonl");
  pack::Manifest m;
  m.shard = pack::ShardMode::kBalanced;
  m.mixture_seed = 4;
  m.sources = {{"web.jsonl", {"d/web.jsonl"}, 3, 0, 0, 10, 10, 3000, 0.75, 0.7504},
               {"books", {"b"}, 1, 0, 1, 0, 5, 1000, 0.25, 0.2496}};
  EXPECT_TRUE(PackSourceProblems(*r, m).empty());
  pack::Manifest off = m;
  off.sources[1].realized_share = 0.26;
  off.mixture_seed = 5;
  off.sources[0].weight = 2;
  off.mixture_tokens = 9000;
  using V = std::vector<std::string>;
  EXPECT_EQ(PackSourceProblems(*r, off),
            (V{"source 'web.jsonl': the pack took weight 2 / epochs 0, the run file says weight 3 "
               "/ epochs 0",
               "source 'books': 26.000% of the tokens against a target of 25.000%",
               "the pack's mixture seed is 5, the run file's data.mixture_seed 4",
               "the pack's mixture asked for 9000 tokens, the run file's data.mixture_tokens 0"}));
  pack::Manifest one = m;
  one.sources.pop_back();
  ASSERT_EQ(PackSourceProblems(*r, one).size(), 1u);
  EXPECT_NE(PackSourceProblems(*r, one)[0].find("the pack has 1 source(s), the run file 2"),
            std::string::npos);
  // A run file without sources (a pack from flags) is not compared.
  auto flags = ParseRunFile("[run]\n", "run.toml");
  ASSERT_TRUE(flags.ok());
  EXPECT_TRUE(PackSourceProblems(*flags, one).empty());
}

}  // namespace
}  // namespace ek::run
