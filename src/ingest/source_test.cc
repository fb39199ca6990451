#include "ingest/source.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>

#include "core/file.h"
#include "core/jsonl.h"
#include "ingest/arrow_source.h"

namespace ek::ingest {
namespace {

struct Got {
  std::vector<std::string> json;
  std::vector<std::string> where;
};

std::string GzipOf(std::string_view data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, data.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string ZstdOf(std::string_view data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3));
  return out;
}

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_ingest_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, std::string_view body) {
    std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(path, body).ok());
    return path;
  }
  Result<Got> ReadAll(const std::string& path, size_t batch = 8u << 20) {
    OpenOptions o;
    o.batch_bytes = batch;
    EK_ASSIGN_OR_RETURN(auto src, Open(path, o));
    Got g;
    std::vector<SourceRecord> recs;
    while (true) {
      EK_ASSIGN_OR_RETURN(bool more, src->Next(&recs));
      if (!more) break;
      for (const auto& r : recs) {
        g.json.emplace_back(r.json);
        g.where.push_back(Where(r));
      }
    }
    return g;
  }
  std::string dir_;
};

const char kLines[] =
    "{\"text\": \"a\"}\n\n  \n{\"text\": \"b \xF0\x9F\x98\x80\"}\r\n{\"text\": \"c\"}";

TEST_F(IngestTest, EachKindIsDetected) {
  EXPECT_EQ(*DetectKind(Write("a.jsonl", kLines)), FileKind::kJsonLines);
  EXPECT_EQ(*DetectKind(Write("a.json", "[{}]")), FileKind::kJson);
  EXPECT_EQ(*DetectKind(Write("a.jsonl.zst", ZstdOf(kLines))), FileKind::kJsonLines);
  EXPECT_EQ(*DetectKind(Write("a.jsonl.gz", GzipOf(kLines))), FileKind::kJsonLines);
  EXPECT_EQ(*DetectKind(Write("a.parquet", "PAR1\x15\x04PAR1")), FileKind::kParquet);
  EXPECT_EQ(*DetectKind(Write("a.arrow", std::string("ARROW1\0\0", 8))), FileKind::kArrow);
  EXPECT_EQ(*DetectKind(Write("s.arrow", "\xFF\xFF\xFF\xFF\x10\0\0\0")), FileKind::kArrow);
  EXPECT_EQ(*DetectKind("-"), FileKind::kJsonLines);
  std::filesystem::create_directories(dir_ + "/ds");
  Write("ds/state.json", "{}");
  Write("ds/dataset_info.json", "{}");
  EXPECT_EQ(*DetectKind(dir_ + "/ds"), FileKind::kDatasetsDir);
  std::filesystem::create_directories(dir_ + "/dd");
  Write("dd/dataset_dict.json", "{\"splits\": [\"train\"]}");
  EXPECT_EQ(*DetectKind(dir_ + "/dd"), FileKind::kDatasetsDir);
}

TEST_F(IngestTest, AMisnamedFileIsReadAsItsBytesSay) {
  EXPECT_EQ(*DetectKind(Write("really-parquet.jsonl", "PAR1xxxxPAR1")), FileKind::kParquet);
  // gzip bytes under a plain name: inflated, same records as the plain file.
  auto plain = ReadAll(Write("p.jsonl", kLines));
  auto gz = ReadAll(Write("gz-but-named.jsonl", GzipOf(kLines)));
  ASSERT_TRUE(plain.ok() && gz.ok()) << gz.status().message();
  EXPECT_EQ(gz->json, plain->json);
  // JSON lines under a .parquet name: read as JSON, not refused as "no PAR1".
  auto lines = ReadAll(Write("lines.parquet", kLines));
  ASSERT_TRUE(lines.ok()) << lines.status().message();
  EXPECT_EQ(lines->json, plain->json);
  // zstd bytes without .zst in the name, and a .zst name on plain bytes: refused, saying how.
  auto z = DetectKind(Write("z.jsonl", ZstdOf(kLines)));
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("rename it"), std::string::npos) << z.status().message();
  auto nz = DetectKind(Write("nz.jsonl.zst", kLines));
  ASSERT_FALSE(nz.ok());
  EXPECT_NE(nz.status().message().find("not zstd-compressed"), std::string::npos);
  auto np = DetectKind(Write("text.parquet", "hello, this is not parquet"));
  ASSERT_FALSE(np.ok());
  EXPECT_NE(np.status().message().find("no PAR1 magic"), std::string::npos);
}

TEST_F(IngestTest, OtherFilesAreRefusedWithWhatIsAcceptedAndHowToConvert) {
  std::filesystem::create_directories(dir_ + "/empty");
  for (const std::string& path :
       {Write("a.csv", "text\nhello\n"), Write("notes.txt", "{\"text\": \"x\"}\n"),
        Write("c.tar.gz", GzipOf("x")), dir_ + "/empty"}) {
    auto k = DetectKind(path);
    ASSERT_FALSE(k.ok()) << path;
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
    const std::string& msg = k.status().message();
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
    for (const char* want : {".jsonl", ".parquet", "Dataset.to_json(\"x.jsonl\")",
                             "Dataset.to_parquet", "save_to_disk"})
      EXPECT_NE(msg.find(want), std::string::npos) << want << " in " << msg;
  }
  auto dir = DetectKind(dir_ + "/empty");
  EXPECT_NE(dir.status().message().find("is a directory, expected a file"), std::string::npos);
  auto missing = DetectKind(dir_ + "/absent.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(IngestTest, JsonLinesSkipBlankLinesAndKeepTheFilesLineNumbers) {
  auto g = ReadAll(Write("a.jsonl", kLines));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->json.size(), 3u);
  EXPECT_EQ(g->where, (std::vector<std::string>{dir_ + "/a.jsonl:1", dir_ + "/a.jsonl:4",
                                                dir_ + "/a.jsonl:5"}));
  EXPECT_EQ(g->json[2], "{\"text\": \"c\"}");
}

TEST_F(IngestTest, AByteOrderMarkIsSkippedAndRecordOneIsStillLineOne) {
  auto plain = ReadAll(Write("p.jsonl", kLines));
  for (std::string name : {"bom.jsonl", "bom.json"}) {
    auto g = ReadAll(Write(name, std::string("\xEF\xBB\xBF") + kLines));
    ASSERT_TRUE(g.ok()) << g.status().message();
    EXPECT_EQ(g->json, plain->json);
    EXPECT_EQ(g->where.front(), dir_ + "/" + name + ":1");
  }
  auto arr = ReadAll(Write("bom-array.json", "\xEF\xBB\xBF [{\"text\": \"a\"}]"));
  ASSERT_TRUE(arr.ok()) << arr.status().message();
  EXPECT_EQ(arr->json, (std::vector<std::string>{"{\"text\": \"a\"}"}));
  auto gz = ReadAll(Write("bom.jsonl.gz", GzipOf(std::string("\xEF\xBB\xBF") + kLines)));
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(gz->json, plain->json);
}

TEST_F(IngestTest, GzipAndZstdGiveTheSameRecordsAsPlain) {
  std::string big;
  for (int i = 0; i < 20000; ++i) big += "{\"text\": \"record " + std::to_string(i) + "\"}\n";
  auto plain = ReadAll(Write("p.jsonl", big), 4096);
  auto gz = ReadAll(Write("p.jsonl.gz", GzipOf(big)), 4096);
  auto zs = ReadAll(Write("p.jsonl.zst", ZstdOf(big)), 4096);
  // Two gzip members back to back (cat a.gz b.gz) are one stream.
  auto two =
      ReadAll(Write("two.jsonl.gz", GzipOf(big.substr(0, 1000)) + GzipOf(big.substr(1000))), 4096);
  ASSERT_TRUE(plain.ok() && gz.ok() && zs.ok() && two.ok()) << two.status().message();
  ASSERT_EQ(plain->json.size(), 20000u);
  EXPECT_EQ(gz->json, plain->json);
  EXPECT_EQ(zs->json, plain->json);
  EXPECT_EQ(two->json, plain->json);
  EXPECT_EQ(gz->where.back(), dir_ + "/p.jsonl.gz:20000");
}

TEST_F(IngestTest, ATruncatedGzipIsAnErrorNamingTheFile) {
  std::string big;
  for (int i = 0; i < 5000; ++i) big += "{\"text\": \"record " + std::to_string(i) + "\"}\n";
  std::string gz = GzipOf(big);
  std::string path = Write("cut.jsonl.gz", gz.substr(0, gz.size() / 2));
  auto g = ReadAll(path);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(g.status().message().find(path + ": truncated gzip"), std::string::npos)
      << g.status().message();
  // Cut inside the 8-byte trailer: still an error, not a silent short read.
  auto t = ReadAll(Write("cut-trailer.jsonl.gz", gz.substr(0, gz.size() - 3)));
  EXPECT_FALSE(t.ok());
  auto bad = ReadAll(Write("garbage.jsonl.gz", std::string("\x1F\x8B") + std::string(50, 'x')));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("garbage.jsonl.gz: gzip: "), std::string::npos)
      << bad.status().message();
}

TEST_F(IngestTest, AJsonArrayOfObjectsIsReadElementByElement) {
  const std::string body =
      "[\n  {\"text\": \"a ] } [ {\\\" \\\\\"},\n  {\"messages\": [{\"role\": \"user\", "
      "\"content\": \"x\"}]}, {\"text\": \"\xE4\xB8\xAD\"}\n]\n";
  for (size_t batch : {size_t{1}, size_t{7}, size_t{8} << 20}) {
    auto g = ReadAll(Write("a.json", body), batch);
    ASSERT_TRUE(g.ok()) << g.status().message();
    ASSERT_EQ(g->json.size(), 3u);
    EXPECT_EQ(g->json[0], "{\"text\": \"a ] } [ {\\\" \\\\\"}");
    EXPECT_EQ(g->json[2], "{\"text\": \"\xE4\xB8\xAD\"}");
    EXPECT_EQ(g->where[1], dir_ + "/a.json: element 2");
  }
  // Bigger than one read (1 MiB): elements straddle the reads.
  std::string big = "[";
  for (int i = 0; i < 60000; ++i)
    big += (i ? "," : "") + std::string("{\"text\": \"r") + std::to_string(i) + "\"}";
  big += "]";
  auto g = ReadAll(Write("big.json", big), 100000);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->json.size(), 60000u);
  EXPECT_EQ(g->json[59999], "{\"text\": \"r59999\"}");
  auto empty = ReadAll(Write("empty-array.json", " [ ] "));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->json.empty());
}

TEST_F(IngestTest, AMalformedArrayNamesTheByteOffset) {
  struct Case {
    std::string body, want;
  } cases[] = {
      {"[{\"a\": 1} {\"b\": 2}]",
       "byte 10: malformed JSON array: expected ',' or ']' after element 1"},
      {"[{\"a\": 1}, 7]", "byte 11: malformed JSON array: element 2 is not an object"},
      {"[{\"a\": 1}, {\"b\": ", "byte 17: malformed JSON array: the file ends inside element 2"},
      {"[{\"a\": 1},", "byte 10: malformed JSON array: the file ends before the array's closing"},
      {"[{\"a\": 1}] x", "byte 11: malformed JSON array: text after the array's closing ']'"},
      {"[{\"a\": [1}]", "byte 9: malformed JSON array: element 1: '}' closes a '['"},
  };
  for (const auto& c : cases) {
    std::string path = Write("bad.json", c.body);
    auto g = ReadAll(path);
    ASSERT_FALSE(g.ok()) << c.body;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(path + ": " + c.want), std::string::npos)
        << g.status().message();
  }
}

TEST_F(IngestTest, JsonLinesInADotJsonFileAreJsonLines) {
  auto g = ReadAll(Write("lines.json", kLines));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->json.size(), 3u);
  EXPECT_EQ(g->where[1], dir_ + "/lines.json:4");
}

TEST_F(IngestTest, AnEmptyFileHasNoRecords) {
  for (std::string name : {"e.jsonl", "e.json", "e.jsonl.gz"}) {
    auto g = ReadAll(Write(name, ""));
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().message();
    EXPECT_TRUE(g->json.empty());
  }
}

TEST_F(IngestTest, IdentityIsTheSizeAndHashOfTheBytesOnDisk) {
  std::string gz = GzipOf(kLines);
  auto id = IdentifyInput(Write("a.jsonl.gz", gz));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size, gz.size());
  uint64_t size = 0;
  EXPECT_EQ(id->xxh3, *HashFile(dir_ + "/a.jsonl.gz", &size));
  EXPECT_FALSE(IdentifyInput("-").ok());
  // A pipe is read once; the pack reads twice, so it is refused up front.
  std::string fifo = dir_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto p = IdentifyInput(fifo);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("a pipe or device cannot be packed"), std::string::npos);
}

// Plain JSON lines are counted by the read that hashes them (pass 1 of a pack); the count
// is the records Open hands out, for blank and CR lines, byte-order marks whole and in
// part, a last line without '\n', and lines across the 1 MiB reads. The compressed kinds
// are hashed only.
TEST_F(IngestTest, ThePlainJsonLinesIdentityCountsTheRecordsOpenReads) {
  const std::string big(1u << 20, 'x');
  const std::string bom = "\xEF\xBB\xBF";
  const std::vector<std::string> texts = {
      "", "\n", " \t\r\n\n", kLines, std::string(kLines) + "\n", "{}", "{}\n\n{}", bom, bom + "\n",
      bom + "{}", bom + " \n{}\n", "\xEF\xBB", "\xEF\xBB\n{}", "\xEF{}", " " + bom + "{}",
      "{}\n" + bom + "\n",
      // lines across the reads: a record and a blank line each ending past 1 MiB
      "{\"text\": \"" + big + "\"}\n  \n{}", std::string((1u << 20) - 1, ' ') + "\n{}\n",
      std::string((1u << 20) - 1, ' ') + "x", std::string(1u << 20, '\n') + "{}"};
  for (size_t k = 0; k < texts.size(); ++k) {
    const std::string path = Write("c" + std::to_string(k) + ".jsonl", texts[k]);
    auto id = IdentifyInput(path);
    ASSERT_TRUE(id.ok()) << k << ": " << id.status().message();
    uint64_t size = 0;
    EXPECT_EQ(id->xxh3, *HashFile(path, &size)) << k;
    EXPECT_EQ(id->size, texts[k].size()) << k;
    auto g = ReadAll(path, 64);
    ASSERT_TRUE(g.ok()) << k << ": " << g.status().message();
    EXPECT_EQ(id->records, static_cast<int64_t>(g->json.size())) << "text " << k;
  }
  EXPECT_EQ(IdentifyInput(Write("n.jsonl", kLines))->records, 3);
  EXPECT_EQ(IdentifyInput(Write("z.jsonl.zst", ZstdOf(kLines)))->records, -1);
  EXPECT_EQ(IdentifyInput(Write("g.jsonl.gz", GzipOf(kLines)))->records, -1);
  EXPECT_EQ(IdentifyInput(Write("a.json", "[{}, {}]"))->records, -1);
}

// Each build checks its own answer for a table: without Arrow, a refusal saying how to
// convert; with it, the file is read by Arrow (this one is not Parquet inside: an error
// naming it, never the "built without" refusal).
TEST_F(IngestTest, ATableIsReadByArrowOrRefusedSayingHowToConvert) {
  std::string path = Write("t.parquet", "PAR1xxxxPAR1");
  auto s = Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(path), std::string::npos) << s.status().message();
  if (ArrowAvailable()) {
    EXPECT_NE(s.status().code(), StatusCode::kUnsupported) << s.status().message();
    EXPECT_EQ(s.status().message().find("built without"), std::string::npos)
        << s.status().message();
  } else {
    EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(s.status().message().find("Dataset.to_json"), std::string::npos);
    EXPECT_FALSE(IdentifyInput(path).ok());
  }
}

}  // namespace
}  // namespace ek::ingest
