// The table sources (arrow_source.h) on inputs Arrow C++ itself writes: Parquet (several
// row groups, each compression), Arrow IPC files and streams, save_to_disk-shaped
// directories. tests/pack/test_tables.py does the same with Hugging Face `datasets`.
#include "ingest/arrow_source.h"

#include <arrow/builder.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <arrow/json/from_string.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <gtest/gtest.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>
#include <stdlib.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace ek::ingest {
namespace {

namespace fs = std::filesystem;

class ArrowSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ek_arrow_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::shared_ptr<arrow::Array> FromJson(const std::shared_ptr<arrow::DataType>& type,
                                       const std::string& json) {
  auto a = arrow::json::ArrayFromJSONString(type, json);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return *a;
}

// Rows of every JSON-able kind, with the JSON each must read back as.
struct Rows {
  std::shared_ptr<arrow::Schema> schema;
  std::shared_ptr<arrow::RecordBatch> batch;
  std::vector<std::string> json;
};

Rows MixedRows() {
  auto msg =
      arrow::struct_({arrow::field("role", arrow::utf8()), arrow::field("content", arrow::utf8())});
  auto schema = arrow::schema({
      arrow::field("text", arrow::utf8()),
      arrow::field("n", arrow::int64()),
      arrow::field("u8", arrow::uint8()),
      arrow::field("score", arrow::float64()),
      arrow::field("f32", arrow::float32()),
      arrow::field("ok", arrow::boolean()),
      arrow::field("messages", arrow::list(msg)),
      arrow::field("tags", arrow::map(arrow::utf8(), arrow::int32())),
      arrow::field("big", arrow::large_utf8()),
  });
  std::vector<std::shared_ptr<arrow::Array>> cols = {
      FromJson(arrow::utf8(), R"(["héllo \"q\"\n", null, "日本語 🙂", ""])"),
      FromJson(arrow::int64(), R"([-9223372036854775808, 2, null, 9223372036854775807])"),
      FromJson(arrow::uint8(), R"([255, 0, 1, null])"),
      FromJson(arrow::float64(), R"([0.1, 1e21, NaN, null])"),
      FromJson(arrow::float32(), R"([0.5, -2, null, 3])"),
      FromJson(arrow::boolean(), R"([true, false, null, true])"),
      FromJson(arrow::list(msg),
               R"([[{"role": "user", "content": "hi"}, {"role": "assistant", "content": null}],
                   [], null, [null]])"),
      FromJson(arrow::map(arrow::utf8(), arrow::int32()),
               R"([[["a", 1], ["b", null]], [], null, [["z", 0]]])"),
      FromJson(arrow::large_utf8(), R"(["x", "y", "z", null])"),
  };
  Rows r;
  r.schema = schema;
  r.batch = arrow::RecordBatch::Make(schema, 4, cols);
  r.json = {
      R"({"text":"héllo \"q\"\n","n":-9223372036854775808,"u8":255,"score":0.1,"f32":0.5,"ok":true,)"
      R"("messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}],"tags":{"a":1,"b":null},"big":"x"})",
      R"({"text":null,"n":2,"u8":0,"score":1e+21,"f32":-2,"ok":false,"messages":[],"tags":{},"big":"y"})",
      R"({"text":"日本語 🙂","n":null,"u8":1,"score":null,"f32":null,"ok":null,"messages":null,"tags":null,"big":"z"})",
      R"({"text":"","n":9223372036854775807,"u8":null,"score":null,"f32":3,"ok":true,"messages":[null],"tags":{"z":0},"big":null})",
  };
  return r;
}

// Text rows "row 1" ... "row n".
std::shared_ptr<arrow::Table> TextTable(int n, int offset = 0) {
  arrow::StringBuilder b;
  for (int i = 1; i <= n; ++i) EXPECT_TRUE(b.Append("row " + std::to_string(offset + i)).ok());
  std::shared_ptr<arrow::Array> a;
  EXPECT_TRUE(b.Finish(&a).ok());
  return arrow::Table::Make(arrow::schema({arrow::field("text", arrow::utf8())}), {a});
}

void WriteParquet(const arrow::Table& table, const std::string& path, int64_t rows_per_group,
                  parquet::Compression::type codec = parquet::Compression::SNAPPY) {
  auto out = arrow::io::FileOutputStream::Open(path);
  ASSERT_TRUE(out.ok());
  auto props = parquet::WriterProperties::Builder().compression(codec)->build();
  ASSERT_TRUE(
      parquet::arrow::WriteTable(table, arrow::default_memory_pool(), *out, rows_per_group, props)
          .ok());
  ASSERT_TRUE((*out)->Close().ok());
}

void WriteIpc(const arrow::Table& table, const std::string& path, bool stream,
              int64_t rows_per_batch) {
  auto out = arrow::io::FileOutputStream::Open(path);
  ASSERT_TRUE(out.ok());
  auto w = stream ? arrow::ipc::MakeStreamWriter(*out, table.schema())
                  : arrow::ipc::MakeFileWriter(*out, table.schema());
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->WriteTable(table, rows_per_batch).ok());
  ASSERT_TRUE((*w)->Close().ok());
  ASSERT_TRUE((*out)->Close().ok());
}

struct Read {
  std::vector<std::string> json;
  std::vector<uint64_t> numbers;
  std::vector<std::string> files;
  int batches = 0;
};

Read ReadAll(const std::string& path, FileKind kind, OpenOptions opt = {}) {
  Read r;
  auto src = OpenArrowSource(path, kind, opt);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  if (!src.ok()) return r;
  std::vector<SourceRecord> recs;
  while (true) {
    auto more = (*src)->Next(&recs);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    ++r.batches;
    for (const SourceRecord& rec : recs) {
      EXPECT_EQ(rec.unit, Unit::kRow);
      r.json.emplace_back(rec.json);
      r.numbers.push_back(rec.number);
      r.files.push_back(*rec.file);
    }
  }
  EXPECT_EQ((*src)->consumed_bytes(), (*src)->total_bytes());
  auto rows = CountArrowRows(path, kind, opt);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  if (rows.ok()) {
    EXPECT_EQ(*rows, r.json.size());
  }
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(ArrowAvailableTest, ThisBuildReadsTables) { EXPECT_TRUE(ArrowAvailable()); }

TEST_F(ArrowSourceTest, ParquetRowsAreTheJsonOfTheirColumns) {
  Rows rows = MixedRows();
  auto table = *arrow::Table::FromRecordBatches({rows.batch});
  for (auto codec : {parquet::Compression::SNAPPY, parquet::Compression::ZSTD,
                     parquet::Compression::GZIP, parquet::Compression::UNCOMPRESSED}) {
    SCOPED_TRACE(static_cast<int>(codec));
    WriteParquet(*table, Path("mixed.parquet"), 3, codec);  // two row groups: 3 + 1
    Read r = ReadAll(Path("mixed.parquet"), FileKind::kParquet);
    EXPECT_EQ(r.json, rows.json);
    EXPECT_EQ(r.numbers, (std::vector<uint64_t>{1, 2, 3, 4}));
    EXPECT_EQ(r.files, std::vector<std::string>(4, Path("mixed.parquet")));
  }
}

TEST_F(ArrowSourceTest, ArrowFilesAndStreamsReadAsParquetDoes) {
  Rows rows = MixedRows();
  auto table = *arrow::Table::FromRecordBatches({rows.batch});
  for (bool stream : {false, true}) {
    WriteIpc(*table, Path("mixed.arrow"), stream, 3);
    Read r = ReadAll(Path("mixed.arrow"), FileKind::kArrow);
    EXPECT_EQ(r.json, rows.json) << (stream ? "stream" : "file");
    EXPECT_EQ(r.numbers, (std::vector<uint64_t>{1, 2, 3, 4}));
  }
}

TEST_F(ArrowSourceTest, DictionaryStringsAndSlicedBatchesReadAsTheirValues) {
  auto dict_type = arrow::dictionary(arrow::int8(), arrow::utf8());
  auto dict =
      arrow::json::DictArrayFromJSONString(dict_type, "[1, 0, null, 1, 1]", R"(["a", "b"])");
  ASSERT_TRUE(dict.ok());
  auto schema = arrow::schema({arrow::field("text", dict_type)});
  // A batch sliced off its start: offsets into the child arrays must be honoured.
  auto batch = arrow::RecordBatch::Make(schema, 5, {*dict})->Slice(1, 4);
  WriteIpc(*(*arrow::Table::FromRecordBatches({batch})), Path("dict.arrow"), true, 100);
  Read r = ReadAll(Path("dict.arrow"), FileKind::kArrow);
  EXPECT_EQ(r.json, (std::vector<std::string>{R"({"text":"a"})", R"({"text":null})",
                                              R"({"text":"b"})", R"({"text":"b"})"}));
}

TEST_F(ArrowSourceTest, ManyRowGroupsStreamInOrderInBatchesOfAboutBatchBytes) {
  WriteParquet(*TextTable(5000), Path("t.parquet"), 700);
  OpenOptions opt;
  opt.batch_bytes = 1000;
  Read r = ReadAll(Path("t.parquet"), FileKind::kParquet, opt);
  ASSERT_EQ(r.json.size(), 5000u);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(r.json[i], "{\"text\":\"row " + std::to_string(i + 1) + "\"}");
    ASSERT_EQ(r.numbers[i], static_cast<uint64_t>(i + 1));
  }
  EXPECT_GT(r.batches, 50);  // ~1000 bytes of ~20-byte records each
}

TEST_F(ArrowSourceTest, ABinaryColumnIsRefusedNamingTheFileAndTheColumn) {
  auto schema = arrow::schema(
      {arrow::field("text", arrow::utf8()),
       arrow::field("meta", arrow::struct_({arrow::field("blob", arrow::binary())}))});
  auto batch = arrow::RecordBatch::Make(schema, 1,
                                        {FromJson(arrow::utf8(), R"(["a"])"),
                                         FromJson(schema->field(1)->type(), R"([{"blob": "x"}])")});
  auto table = *arrow::Table::FromRecordBatches({batch});
  WriteParquet(*table, Path("bin.parquet"), 10);
  WriteIpc(*table, Path("bin.arrow"), true, 10);
  for (auto [name, kind] :
       {std::pair{"bin.parquet", FileKind::kParquet}, std::pair{"bin.arrow", FileKind::kArrow}}) {
    EXPECT_FALSE(CountArrowRows(Path(name), kind, {}).ok());
    auto src = OpenArrowSource(Path(name), kind, {});
    ASSERT_FALSE(src.ok());
    EXPECT_EQ(src.status().code(), StatusCode::kUnsupported);
    const std::string& m = src.status().message();
    EXPECT_NE(m.find(Path(name)), std::string::npos) << m;
    EXPECT_NE(m.find("\"meta.blob\" (binary)"), std::string::npos) << m;
    EXPECT_NE(m.find("remove_columns([\"meta\"])"), std::string::npos) << m;
  }
}

TEST_F(ArrowSourceTest, ATimestampColumnIsRefusedWithItsType) {
  auto ts = arrow::timestamp(arrow::TimeUnit::SECOND);
  auto schema = arrow::schema({arrow::field("when", ts)});
  auto batch = arrow::RecordBatch::Make(schema, 1, {FromJson(ts, "[1]")});
  WriteIpc(*(*arrow::Table::FromRecordBatches({batch})), Path("ts.arrow"), false, 10);
  auto src = OpenArrowSource(Path("ts.arrow"), FileKind::kArrow, {});
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("column \"when\" (timestamp[s])"), std::string::npos)
      << src.status().message();
}

TEST_F(ArrowSourceTest, ATruncatedOrForeignFileIsCorruptNamingIt) {
  WriteParquet(*TextTable(10), Path("t.parquet"), 5);
  std::string bytes = Slurp(Path("t.parquet"));
  WriteText(Path("cut.parquet"), bytes.substr(0, bytes.size() / 2));
  WriteText(Path("text.arrow"), "{\"text\": \"not arrow\"}\n");
  for (auto [name, kind] :
       {std::pair{"cut.parquet", FileKind::kParquet}, std::pair{"text.arrow", FileKind::kArrow}}) {
    auto src = OpenArrowSource(Path(name), kind, {});
    ASSERT_FALSE(src.ok()) << name;
    EXPECT_EQ(src.status().code(), StatusCode::kCorrupt) << src.status().ToString();
    EXPECT_NE(src.status().message().find(Path(name)), std::string::npos) << src.status().message();
  }
  auto missing = OpenArrowSource(Path("nope.parquet"), FileKind::kParquet, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(ArrowSourceTest, AStreamCutShortGivesItsRowsThenAnErrorNamingTheFile) {
  WriteIpc(*TextTable(4000), Path("t.arrow"), true, 500);
  const std::string bytes = Slurp(Path("t.arrow"));
  WriteText(Path("cut.arrow"), bytes.substr(0, bytes.size() * 7 / 10));
  OpenOptions opt;
  opt.batch_bytes = 2000;  // many Next() calls: the error arrives from the read-ahead
  auto src = OpenArrowSource(Path("cut.arrow"), FileKind::kArrow, opt);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  std::vector<SourceRecord> recs;
  uint64_t rows = 0;
  Status error;
  while (true) {
    auto more = (*src)->Next(&recs);
    if (!more.ok()) {
      error = more.status();
      break;
    }
    if (!*more) break;
    for (const SourceRecord& r : recs) ASSERT_EQ(r.number, ++rows);
  }
  EXPECT_GT(rows, 1000u);
  EXPECT_LT(rows, 3000u);
  EXPECT_EQ(error.code(), StatusCode::kCorrupt) << error.ToString();
  EXPECT_NE(error.message().find(Path("cut.arrow")), std::string::npos) << error.message();
  auto after = (*src)->Next(&recs);  // and stays ended
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(*after);
}

TEST_F(ArrowSourceTest, ASourceDestroyedWhileReadingAheadStopsCleanly) {
  WriteParquet(*TextTable(20000), Path("t.parquet"), 1000);
  for (int i = 0; i < 20; ++i) {
    OpenOptions opt;
    opt.batch_bytes = 100;
    auto src = OpenArrowSource(Path("t.parquet"), FileKind::kParquet, opt);
    ASSERT_TRUE(src.ok());
    std::vector<SourceRecord> recs;
    for (int k = 0; k < i; ++k) ASSERT_TRUE((*src)->Next(&recs).ok());
  }  // each destroyed with its thread mid-read (ASan and the join catch a race)
}

// save_to_disk's layout: state.json naming Arrow streams, in order.
void WriteDataset(const fs::path& dir, const std::vector<std::shared_ptr<arrow::Table>>& shards,
                  const std::string& split_json = "null") {
  fs::create_directories(dir);
  std::string files;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        "data-0000" + std::to_string(i) + "-of-0000" + std::to_string(shards.size()) + ".arrow";
    WriteIpc(*shards[i], (dir / name).string(), true, 2);
    files += std::string(i ? ", " : "") + "{\"filename\": \"" + name + "\"}";
  }
  WriteText((dir / "state.json").string(),
            "{\"_data_files\": [" + files +
                "], \"_fingerprint\": \"x\", \"_split\": " + split_json + "}");
  WriteText((dir / "dataset_info.json").string(), "{}");
}

TEST_F(ArrowSourceTest, ADatasetDirectoryReadsItsDataFilesInOrderNumberingRowsPerFile) {
  WriteDataset(dir_ / "ds", {TextTable(3), TextTable(2, 3)});
  Read r = ReadAll(Path("ds"), FileKind::kDatasetsDir);
  EXPECT_EQ(r.json, (std::vector<std::string>{R"({"text":"row 1"})", R"({"text":"row 2"})",
                                              R"({"text":"row 3"})", R"({"text":"row 4"})",
                                              R"({"text":"row 5"})"}));
  EXPECT_EQ(r.numbers, (std::vector<uint64_t>{1, 2, 3, 1, 2}));
  EXPECT_EQ(r.files[2], (dir_ / "ds" / "data-00000-of-00002.arrow").string());
  EXPECT_EQ(r.files[3], (dir_ / "ds" / "data-00001-of-00002.arrow").string());

  // Identity: the data files' bytes in reading order.
  auto id = IdentifyArrowInput(Path("ds"), FileKind::kDatasetsDir, {});
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  const std::string all = Slurp(r.files[0]) + Slurp(r.files[3]);
  EXPECT_EQ(id->size, all.size());
  EXPECT_EQ(id->xxh3, XXH3_64bits(all.data(), all.size()));

  OpenOptions train;
  train.split = "train";
  auto src = OpenArrowSource(Path("ds"), FileKind::kDatasetsDir, train);
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("not a DatasetDict: it has no split \"train\""),
            std::string::npos)
      << src.status().message();
  WriteDataset(dir_ / "ds_train", {TextTable(1)}, "\"train\"");
  EXPECT_EQ(ReadAll(Path("ds_train"), FileKind::kDatasetsDir, train).json.size(), 1u);
}

TEST_F(ArrowSourceTest, ADatasetDictReadsTheSplitChosenAndListsThemOtherwise) {
  WriteDataset(dir_ / "dd" / "train", {TextTable(3)});
  WriteDataset(dir_ / "dd" / "test", {TextTable(1, 100)});
  WriteText(Path("dd/dataset_dict.json"), R"({"splits": ["train", "test"]})");
  OpenOptions test;
  test.split = "test";
  EXPECT_EQ(ReadAll(Path("dd"), FileKind::kDatasetsDir, test).json,
            std::vector<std::string>{R"({"text":"row 101"})"});

  auto none = OpenArrowSource(Path("dd"), FileKind::kDatasetsDir, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("splits train, test: choose one (--split NAME"),
            std::string::npos)
      << none.status().message();
  OpenOptions dev;
  dev.split = "dev";
  auto missing = IdentifyArrowInput(Path("dd"), FileKind::kDatasetsDir, dev);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no split \"dev\"; the DatasetDict has train, test"),
            std::string::npos)
      << missing.status().message();

  WriteText(Path("dd/dataset_dict.json"), R"({"splits": "train"})");
  auto bad = OpenArrowSource(Path("dd"), FileKind::kDatasetsDir, test);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(bad.status().message().find("dataset_dict.json: splits"), std::string::npos)
      << bad.status().message();
}

TEST_F(ArrowSourceTest, ADirectoryThatIsNoDatasetSaysWhatItLacks) {
  fs::create_directories(dir_ / "plain");
  auto src = OpenArrowSource(Path("plain"), FileKind::kDatasetsDir, {});
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kNotFound);
  EXPECT_NE(src.status().message().find(Path("plain") + ": no state.json or dataset_dict.json"),
            std::string::npos)
      << src.status().message();
}

TEST_F(ArrowSourceTest, AStateJsonNamingAFileOutsideItsDirectoryIsRefused) {
  WriteDataset(dir_ / "ds", {TextTable(1)});
  WriteText(Path("ds/state.json"), R"({"_data_files": [{"filename": "../secret.arrow"}]})");
  auto src = OpenArrowSource(Path("ds"), FileKind::kDatasetsDir, {});
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("_data_files[0].filename"), std::string::npos)
      << src.status().message();
}

}  // namespace
}  // namespace ek::ingest
