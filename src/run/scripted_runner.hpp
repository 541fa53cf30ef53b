// A Runner for tests: runs nothing, records every Command (argv, env, cwd, log) and answers
// from a script: output lines (written to the log and the line callback like the real runner),
// an exit status / signal / interruption, and files to create (to simulate a build's outputs).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "run/runner.hpp"

namespace archbuild::run {

struct ScriptedResponse {
  std::vector<std::string> lines;  // output lines, in order
  int exit_status = 0;
  int signal = 0;
  bool interrupted = false;
  bool start_error = false;        // as if the program could not be started
  std::string error = "scripted start failure";
  // Files to create before returning: relative paths are taken from the command's cwd.
  std::map<std::filesystem::path, std::string> files;
  std::function<void(const Command&)> effect;  // anything else (runs after `files`)
};

class ScriptedRunner : public Runner {
 public:
  using Match = std::function<bool(const Command&)>;

  // A rule answers the commands whose argv starts with `argv_prefix` (argv[0] compares by file
  // name unless the prefix's argv[0] holds a '/'; an empty prefix matches everything). Rules are
  // tried in the order added; `times` > 0 retires a rule after that many uses.
  ScriptedRunner& on(std::vector<std::string> argv_prefix, ScriptedResponse response, int times = 0);
  ScriptedRunner& on(Match match, ScriptedResponse response, int times = 0);
  // The answer when no rule matches (default: success, no output). With strict(), an unmatched
  // command fails to start with "unexpected command: …".
  ScriptedRunner& otherwise(ScriptedResponse response);
  ScriptedRunner& strict();

  CommandResult run(const Command& cmd, const LineCallback& on_line = {},
                    const TickCallback& on_tick = {}) override;

  const std::vector<Command>& calls() const { return calls_; }
  // Commands run so far whose argv starts with the prefix (same matching as on()).
  std::vector<Command> calls_matching(const std::vector<std::string>& argv_prefix) const;
  void clear_calls() { calls_.clear(); }

  static bool argv_matches(const std::vector<std::string>& argv, const std::vector<std::string>& prefix);

 private:
  struct Rule {
    Match match;
    ScriptedResponse response;
    int remaining;  // 0: unlimited
  };
  std::vector<Rule> rules_;
  ScriptedResponse fallback_;
  bool strict_ = false;
  std::vector<Command> calls_;
};

}  // namespace archbuild::run
