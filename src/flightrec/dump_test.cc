#include "flightrec/dump.h"

#include <gtest/gtest.h>

#include "core/file.h"
#include "flightrec/loader.h"
#include "flightrec/test_util.h"

namespace ek::flightrec {
namespace {

std::string Rank0(const std::string& fixture) { return FixtureDir(fixture) + "/nccl_trace_rank_0"; }

TEST(Dump, ReadsPickleFixture) {
  auto d = ReadDumpFile(Rank0("type_mismatch"), 0);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->format, DumpFormat::kPickle);
  EXPECT_EQ(d->version, "2.10");
  EXPECT_EQ(d->minor, 10);
  EXPECT_EQ(d->comm_lib_version, "2.21.5");
  ASSERT_EQ(d->pg_configs.size(), 1u);
  EXPECT_EQ(d->pg_configs[0].desc, "default_pg");
  EXPECT_EQ(d->pg_configs[0].ranks, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(d->entries.size(), 3u);
  const Entry& e = d->entries[2];
  EXPECT_EQ(d->sym(e.profiling_name), "nccl:reduce_scatter");
  EXPECT_EQ(d->sym(e.input_sizes), "[[4, 256]]");
  EXPECT_EQ(d->sym(e.output_sizes), "[[256]]");
  EXPECT_EQ(d->sym(e.input_dtypes), "['Float']");
  EXPECT_EQ(d->sym(e.state), "started");
  EXPECT_EQ(e.collective_seq_id, 3);
  EXPECT_EQ(e.input_numel0, 1024);
  EXPECT_EQ(e.time_discovered_completed_ns, 0);  // None in the pickle
  EXPECT_TRUE(std::isnan(e.duration_ms));        // key absent
  EXPECT_EQ(d->entries[0].duration_ms, 0.25);
  // Frame dicts are shared objects: train_step is stored once for three entries.
  ASSERT_GE(e.stack, 0);
  EXPECT_EQ(d->stacks[e.stack].size(), 2u);
  EXPECT_EQ(d->frames[d->stacks[e.stack][0]].name, "reduce_scatter");
  EXPECT_EQ(d->frames.size(), 3u);
  ASSERT_EQ(d->pg_status.size(), 1u);
  EXPECT_EQ(d->pg_status[0].last_completed, 2);
}

TEST(Dump, JsonFormReadsToTheSameModel) {
  auto p = ReadDumpFile(Rank0("type_mismatch"), 0);
  auto j = ReadDumpFile(Rank0("type_mismatch_json"), 0);
  ASSERT_TRUE(p.ok() && j.ok()) << j.status().message();
  EXPECT_EQ(j->format, DumpFormat::kJson);
  ASSERT_EQ(p->entries.size(), j->entries.size());
  for (size_t i = 0; i < p->entries.size(); ++i) {
    const Entry &a = p->entries[i], &b = j->entries[i];
    EXPECT_EQ(p->sym(a.profiling_name), j->sym(b.profiling_name));
    EXPECT_EQ(p->sym(a.pg_name), j->sym(b.pg_name));
    EXPECT_EQ(p->sym(a.input_sizes), j->sym(b.input_sizes));
    EXPECT_EQ(p->sym(a.state), j->sym(b.state));
    EXPECT_EQ(a.collective_seq_id, b.collective_seq_id);
    EXPECT_EQ(a.time_created_ns, b.time_created_ns);
    EXPECT_EQ(b.stack, -1);  // JSON dumps carry no frames
  }
  EXPECT_EQ(p->pg_status[0].last_enqueued, j->pg_status[0].last_enqueued);  // "3" in JSON
}

TEST(Dump, ReadsVersion1) {
  auto d = ReadDumpFile(Rank0("v1_type_mismatch"), 0);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->major, 1);
  ASSERT_EQ(d->entries.size(), 2u);
  EXPECT_EQ(d->entries[1].collective_seq_id, 2);  // from seq_id
  EXPECT_EQ(d->sym(d->entries[1].pg_name), "0");  // from pg_id
  EXPECT_EQ(d->pg_configs[0].ranks, (std::vector<int64_t>{0, 1}));
}

TEST(Dump, UnknownVersionIsRefused) {
  for (const char* v : {"3.0", "2.11", "x"}) {
    std::string json = std::string(R"({"version":")") + v + R"(","pg_config":{}})";
    auto d = ParseDump(json, "f", 0);
    ASSERT_FALSE(d.ok()) << v;
    EXPECT_EQ(d.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(d.status().message().find("unknown dump version"), std::string::npos);
  }
}

TEST(Dump, MissingFieldNamesTheEntry) {
  auto d = ParseDump(
      R"({"version":"2.10","pg_config":{},"entries":[{"record_id":0,"profiling_name":"nccl:all_reduce",
    "input_sizes":[[1]],"output_sizes":[[1]],"process_group":["0","x"],"collective_seq_id":1}]})",
      "f", 0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "f: entry 0: missing field 'state'");
}

// Regression (fuzz_pickle): the product of a tensor's dimensions overflowed
// int64 (UBSan: signed integer overflow in ParseSizesSlow).
TEST(Dump, TensorSizesOverflowingInt64AreAnError) {
  auto d = ParseDump(
      R"({"version":"2.10","pg_config":{},"entries":[{"record_id":0,"profiling_name":"nccl:all_reduce",
    "input_sizes":[[4294967296,4294967296]],"output_sizes":[[1]],"process_group":["0","x"],"collective_seq_id":1,
    "state":"completed"}]})",
      "f", 0);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "f: entry 0: a tensor's element count overflows 64 bits");
  auto sum = ParseDump(
      R"({"version":"2.10","pg_config":{},"entries":[{"record_id":0,"profiling_name":"nccl:all_reduce",
    "input_sizes":[[4611686018427387904],[4611686018427387904]],"output_sizes":[[1]],"process_group":["0","x"],
    "collective_seq_id":1,"state":"completed"}]})",
      "f", 0);
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().message(), "f: entry 0: the tensors' element count overflows 64 bits");
}

TEST(Dump, NeitherPickleNorJson) {
  auto d = ParseDump("hello", "f", 0);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("neither a pickle"), std::string::npos);
}

}  // namespace
}  // namespace ek::flightrec

namespace ek::flightrec {
namespace {

// Truncations and byte flips of a real dump: every one either parses or is
// an error naming the file; none may crash, hang or allocate without bound
// (run under ASan/UBSan in CI).
TEST(Dump, CorruptedBytesAreErrorsNotCrashes) {
  auto bytes = ReadFile(FixtureDir("real/gloo_barrier") + "/nccl_trace_rank_3");
  ASSERT_TRUE(bytes.ok());
  const std::string& good = *bytes;
  size_t errors = 0;
  for (size_t cut = 0; cut < good.size(); cut += 7) {
    auto d = ParseDump(std::string_view(good).substr(0, cut), "f", 3);
    EXPECT_FALSE(d.ok()) << "truncated at " << cut;  // a prefix of a pickle has no STOP
    errors += !d.ok();
  }
  uint64_t x = 88172645463325252ull;  // xorshift: deterministic
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      bad[2 + x % (bad.size() - 2)] = static_cast<char>(x >> 32);
    }
    auto d = ParseDump(bad, "f", 3);
    if (!d.ok()) {
      ++errors;
      EXPECT_EQ(d.status().message().rfind("f: ", 0), 0u) << d.status().message();
    }
  }
  EXPECT_GT(errors, good.size() / 7);
}

}  // namespace
}  // namespace ek::flightrec
