// A test fixture that gives each test a fresh directory, removed afterwards, with helpers to
// name, read and list what is in it (io_test and plan_job_test write outputs there).
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pulse::test {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (std::filesystem::temp_directory_path() / "pulse-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(name.data()), nullptr);
    dir_ = name;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string get(const std::string& name) const {
    std::ifstream in(path(name));
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  /// Every entry of the directory, temporaries included, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      out.push_back(e.path().filename());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::filesystem::path dir_;
};

}  // namespace pulse::test
