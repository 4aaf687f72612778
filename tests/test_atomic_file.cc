// AtomicFile: the one way a file is replaced. A crash at any point leaves the
// old file or the new one under the final name, never a torn or empty one.
#include "tensorcom/codec/atomic_file.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tensorcom/codec/error.h"
#include "test_support.h"

using tensorcom::AtomicFile;
using tensorcom::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> temporaries(const fs::path& folder) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().extension() == ".partial") found.push_back(entry.path());
  }
  return found;
}

void put(const fs::path& path, const std::string& text) {
  tensorcom::write_file_atomically(path, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace

TEST_CASE("an atomic file replaces its path only when committed") {
  TempDir dir;
  const fs::path path = dir.path / "classes.json";
  put(path, "old");

  SUBCASE("commit replaces the file and leaves no temporary") {
    AtomicFile file(path);
    file.write(std::string_view("new contents"));
    CHECK(contents(path) == "old");
    CHECK(temporaries(dir.path).size() == 1);
    file.commit();
    CHECK(contents(path) == "new contents");
    CHECK(temporaries(dir.path).empty());
    CHECK(file.fd() == -1);
  }
  SUBCASE("an uncommitted file is removed and the old one kept") {
    {
      AtomicFile file(path);
      file.write(std::string_view("half"));
    }
    CHECK(contents(path) == "old");
    CHECK(temporaries(dir.path).empty());
  }
  SUBCASE("kept when abandoned, if asked, for a salvage") {
    fs::path temporary;
    {
      AtomicFile file(path, AtomicFile::IfAbandoned::kKeep);
      file.write(std::string_view("recorded"));
      temporary = file.temporary();
    }
    CHECK(contents(path) == "old");
    CHECK(contents(temporary) == "recorded");
    AtomicFile again(path, AtomicFile::IfAbandoned::kKeep);
    again.discard();
    CHECK(temporaries(dir.path).size() == 1);  // only the abandoned one
  }
  SUBCASE("a moved-from file owns nothing") {
    AtomicFile first(path);
    AtomicFile second(std::move(first));
    second.write(std::string_view("moved"));
    second.commit();
    CHECK(contents(path) == "moved");
    CHECK(temporaries(dir.path).empty());
  }
  SUBCASE("the new file gets the permissions a plain create would") {
    const mode_t mask = ::umask(022);
    put(dir.path / "fresh", "x");
    ::umask(mask);
    struct stat info {};
    REQUIRE(::stat((dir.path / "fresh").c_str(), &info) == 0);
    CHECK((info.st_mode & 0777) == 0644);
  }
  SUBCASE("writes after a commit, and a missing folder, are errors naming the file") {
    AtomicFile file(path);
    file.commit();
    CHECK_THROWS_AS(file.write(std::string_view("late")), tensorcom::IoError);
    CHECK_THROWS_WITH_AS(AtomicFile(dir.path / "missing" / "x"), doctest::Contains("missing/x"), tensorcom::IoError);
  }
}

TEST_CASE("kill -9 at any moment leaves the old file or the new one, never a torn one") {
  TempDir dir;
  const fs::path path = dir.path / "token.json";
  // Two valid contents of different lengths: a torn write would show as a
  // mix, a prefix or an empty file.
  const std::string small = "{\"epoch\": 1}\n";
  const std::string large = "{\"epoch\": 2, \"pad\": \"" + std::string(200000, 'x') + "\"}\n";
  put(path, small);
  std::mt19937 rng(7);
  int kills = 0;
  for (int round = 0; round < 40; ++round) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        for (int i = 0;; ++i) put(path, i % 2 ? small : large);
      } catch (...) {
        ::_exit(1);
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(200, 20000)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    kills += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    const std::string now = contents(path);
    CHECK((now == small || now == large));
    // A kill can leave at most the one temporary the writer had open.
    const auto left = temporaries(dir.path);
    CHECK(left.size() <= 1);
    for (const fs::path& temporary : left) fs::remove(temporary);
  }
  CHECK(kills == 40);
}
