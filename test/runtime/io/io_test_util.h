//===- io_test_util.h - shared helpers of the pipert I/O tests -------------===//
#ifndef PIPERT_TEST_IO_TEST_UTIL_H
#define PIPERT_TEST_IO_TEST_UTIL_H

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pipert_test {

// Folder with the files gen_fixtures.py wrote (CTest fixture runtime.io.fixtures).
inline std::string fixtures() {
  const char *env = std::getenv("PIPERT_TEST_FIXTURES");
  return env ? env : PIPERT_TEST_FIXTURES_DIR;
}

inline std::string fixture(const std::string &name) {
  std::string path = fixtures() + "/" + name;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    ADD_FAILURE() << "missing fixture " << path
                  << " (run `ctest -R runtime.io.fixtures` or gen_fixtures.py first)";
  return path;
}

// The directories tempDir() made, removed with everything in them when the
// test program exits (PIPERT_TEST_KEEP_TMP=1 keeps them for a look). A death
// test's child that exits through exit() leaves them to the parent.
struct TempDirs {
  std::vector<std::string> dirs;
  pid_t owner = ::getpid();
  ~TempDirs() {
    if (std::getenv("PIPERT_TEST_KEEP_TMP") || ::getpid() != owner)
      return;
    for (const std::string &d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};

inline TempDirs &tempDirs() {
  static TempDirs all;
  return all;
}

// A fresh empty directory per call.
inline std::string tempDir() {
  std::string tmpl = ::testing::TempDir() + "pipert_io_XXXXXX";
  char *dir = ::mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  if (dir)
    tempDirs().dirs.push_back(tmpl);
  return tmpl;
}

// Runs a Python helper script of this folder (with the system Python, which
// has NumPy and onnx, unless told otherwise); returns its exit status.
inline int runPython(const std::string &script, const std::string &args,
                     const char *python = PIPERT_TEST_PYTHON) {
  const std::string cmd =
      std::string(python) + " " + PIPERT_TEST_SCRIPTS_DIR + "/" + script + " " + args;
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

inline std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace pipert_test

#endif
