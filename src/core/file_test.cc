#include "core/file.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

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

// A directory where a file is read, or a file where a directory is, is the
// wrong input (exit 65), not a failing disk (74), and the error says which.
TEST(FileTest, ADirectoryForAFileIsBadInputSayingWhatWasExpected) {
  std::string dir = TempDir();
  auto read = ReadFile(dir);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), dir + ": is a directory, expected a file");
  auto mapped = MappedFile::Open(dir);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mapped.status().message(), dir + ": is a directory, expected a file");
  auto fd = OpenFileForRead(dir);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().message(), dir + ": is a directory, expected a file");
  EXPECT_EQ(OpenForReadError("d", EISDIR).code(), StatusCode::kInvalidArgument);
  // A parent that is a file: the path does not exist.
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "x").ok());
  EXPECT_EQ(ReadFile(dir + "/f/g").status().code(), StatusCode::kNotFound);
}

TEST(FileTest, OpenFileForReadGivesADescriptorAndItsStat) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "abc").ok());
  struct stat st;
  auto fd = OpenFileForRead(dir + "/f", &st);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  EXPECT_EQ(st.st_size, 3);
  char buf[4] = {};
  EXPECT_EQ(::read(*fd, buf, sizeof buf), 3);
  ::close(*fd);
  EXPECT_EQ(OpenFileForRead(dir + "/absent").status().code(), StatusCode::kNotFound);
}

TEST(FileTest, AFileForADirectoryIsBadInputSayingWhatWasExpected) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "x").ok());
  EXPECT_TRUE(CheckDirectory(dir).ok());
  Status file = CheckDirectory(dir + "/f");
  EXPECT_EQ(file.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(file.message(), dir + "/f: is a file, expected a directory");
  Status missing = CheckDirectory(dir + "/absent");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), dir + "/absent: no such directory");
  Status parent = CheckDirectory(dir + "/f/sub");
  EXPECT_EQ(parent.code(), StatusCode::kNotFound);
  EXPECT_EQ(parent.message(), dir + "/f/sub: no such directory (a parent is not a directory)");
  // What opendir says, through the same mapping.
  EXPECT_EQ(::opendir((dir + "/f").c_str()), nullptr);
  EXPECT_EQ(OpenDirError(dir + "/f", errno).message(), dir + "/f: is a file, expected a directory");
  EXPECT_EQ(OpenDirError("d", EACCES).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenDirError("d", EIO).code(), StatusCode::kIoError);
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
