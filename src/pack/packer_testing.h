// The packer tests' fixture (pack_test: packer_test.cc, packer_files_test.cc): a tiny
// tokenizer in a temporary directory, inputs of short texts, a reference packer, and
// readers of a pack's rank and docs files.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/json_out.h"
#include "pack/packer.h"
#include "packfile/layout.h"
#include "tokenize/tiny_tokenizer_testing.h"
#include "tokenize/tokenizer.h"

namespace ek::pack::testing {

class PackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ek_pack_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    tok_path_ = dir_ + "/tokenizer.json";
    ASSERT_TRUE(WriteFileAtomic(tok_path_, tokenize::testing::TinyJson()).ok());
    tok_ = std::move(tokenize::Tokenizer::FromFile(tok_path_)).value();
  }

  std::string WriteInput(const std::string& name, const std::vector<std::string>& texts) {
    std::string body;
    for (const auto& t : texts) body += "{\"text\": " + JsonString(t) + "}\n";
    std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomic(path, body).ok());
    return path;
  }

  PackOptions Options(const std::vector<std::string>& inputs, const std::string& out, int world,
                      int seq) {
    PackOptions o;
    o.tokenizer_path = tok_path_;
    o.inputs = inputs;
    o.out_dir = dir_ + "/" + out;
    o.world = world;
    o.seq_len = seq;
    o.eos_token = "<|x|>";
    return o;
  }

  std::vector<int32_t> ReadRank(const std::string& out, int rank) {
    auto f = ReadFile(dir_ + "/" + out + "/" + RankFileName(rank));
    EXPECT_TRUE(f.ok()) << f.status().message();
    std::vector<int32_t> v(f->size() / 4);
    std::memcpy(v.data(), f->data(), f->size());
    return v;
  }

  std::vector<uint64_t> ReadDocs(const std::string& out, int rank) {
    auto f = ReadFile(dir_ + "/" + out + "/" + DocsFileName(rank));
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) return {};
    std::vector<uint64_t> v(f->size() / 8);
    std::memcpy(v.data(), f->data(), v.size() * 8);
    return v;
  }

  // The reference packer: tokens of each record + EOS, concatenated.
  std::vector<int32_t> Stream(const std::vector<std::string>& texts,
                              const std::vector<size_t>& which) {
    std::vector<int32_t> s;
    for (size_t i : which) {
      auto ids = tok_->Encode(texts[i]);
      s.insert(s.end(), ids->begin(), ids->end());
      s.push_back(261);
    }
    return s;
  }

  std::vector<std::string> Texts(int n) {
    std::vector<std::string> t;
    for (int i = 0; i < n; ++i) {
      std::string s = "hello world " + std::to_string(i);
      for (int k = 0; k < i % 5; ++k) s += " more words héllo";
      t.push_back(s);
    }
    return t;
  }

  std::set<std::string> List(const std::string& sub) {
    std::set<std::string> names;
    DIR* d = ::opendir((dir_ + "/" + sub).c_str());
    if (!d) return names;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.insert(n);
    }
    ::closedir(d);
    return names;
  }

  std::string dir_, tok_path_;
  std::unique_ptr<tokenize::Tokenizer> tok_;
};

}  // namespace ek::pack::testing
