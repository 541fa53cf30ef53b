// Runs a program with an argv vector (no shell) and captures stdout, stderr and exit status.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace archbuild::test {

struct Ran {
  int status = -1;
  std::string out;
  std::string err;
};

struct RunOptions {
  std::map<std::string, std::string> env;   // added to (or replacing in) the inherited environment
  std::vector<std::string> unset_env;
  std::optional<std::filesystem::path> cwd;
  std::string stdin_text;
  // Catches a hang, not a slow build: a wheel build of the example takes ~100 s on a loaded
  // 2-core host (ctest's own --timeout 900 bounds the whole test).
  std::chrono::seconds timeout{600};
};

Ran run(const std::string& program, const std::vector<std::string>& args, const RunOptions& opts = {});
// The archbuild binary built alongside the tests.
Ran archbuild(const std::vector<std::string>& args, const RunOptions& opts = {});
// Path of a tool on PATH, or empty.
std::string which(const std::string& tool);
// `python -m pip wheel` of one local project into `wheelhouse`, with no index (tests never touch
// the network) and no build isolation (the interpreter's own setuptools builds it).
Ran pip_wheel(const std::string& python, const std::filesystem::path& project, const std::filesystem::path& wheelhouse);
// Why `program` cannot serve a test here ("" when it can): it is absent, or it is an ELF program
// for another machine than these tests — the x86_64 nvcc or python of the host beside tests
// built for aarch64 and run under qemu (scripts/test-arm64): the kernel runs it natively, but an
// aarch64 host would have its own, and what it compiles is for the wrong machine.
std::string unusable(const std::string& program);
// `uname -m` as archbuild reads it: the machine whose platform and official wheels are "this
// machine's" (aarch64 under qemu-user, scripts/test-arm64).
std::string machine();

}  // namespace archbuild::test

namespace archbuild::test {

// A program running in the background (stdout/stderr to files), for tests that kill or race it.
class Background {
 public:
  Background(const std::string& program, const std::vector<std::string>& args, const RunOptions& opts = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  int pid() const;
  bool running();
  void kill(int sig);
  Ran wait();  // exit status (or -signal), stdout and stderr
  std::string err_so_far() const;  // what it wrote to stderr until now

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace archbuild::test
