#include "core/file.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ek {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/ek_core_test.XXXXXX";
  return ::mkdtemp(tmpl);
}

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

TEST(FileTest, AtomicWriteThenMap) {
  std::string dir = TempDir();
  std::string path = dir + "/x.bin";
  ASSERT_TRUE(WriteFileAtomic(path, "hello").ok());
  auto m = MappedFile::Open(path);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->data(), "hello");
  EXPECT_EQ(List(dir).size(), 1u);
}

TEST(FileTest, AbandonedWriteLeavesNothing) {
  std::string dir = TempDir();
  {
    auto f = AtomicFile::Create(dir + "/y.bin");
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->Write("partial").ok());
    EXPECT_EQ(List(dir).size(), 1u);  // only the hidden temp file
  }
  EXPECT_TRUE(List(dir).empty());
}

TEST(FileTest, MissingFileNamesPath) {
  auto m = MappedFile::Open("/nonexistent/zzz");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/nonexistent/zzz"), std::string::npos);
}

TEST(FileTest, OpenFailuresAreBadInputNotIoErrors) {
  auto missing = ReadFile("/nonexistent/evenkeel/file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "/nonexistent/evenkeel/file: No such file or directory");
  EXPECT_EQ(OpenForReadError("x", EACCES).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenForReadError("x", EACCES).message(), "x: Permission denied");
  EXPECT_EQ(OpenForReadError("x", EIO).code(), StatusCode::kIoError);
  EXPECT_EQ(MappedFile::Open("/nonexistent/x").status().code(), StatusCode::kNotFound);
}

TEST(FileTest, EmptyFileMapsEmpty) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/e", "").ok());
  auto m = MappedFile::Open(dir + "/e");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->data().empty());
}

}  // namespace
}  // namespace ek
