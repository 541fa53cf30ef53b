// What every operation of the application is given besides its request: the options all commands
// share (--cache-dir, -v/-q, --json, --color) and where its notes and warnings go while it runs
// (stderr for the command line, a string stream in tests). Results come back as values; only
// these progress lines are written on the way.
#pragma once

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "app/facts.hpp"
#include "run/runner.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::app {

struct Session {
  std::optional<std::filesystem::path> cache_dir;  // --cache-dir
  std::string color = "auto";                      // --color auto|always|never
  int verbosity = 0;                               // -v / -q
  bool json = false;                               // --json: one document on stdout, no human lines there
  std::ostream* err = &std::cerr;                  // notes, warnings, error lines
  // The processes of a build and of its build venv's pip; nullptr: this process's own
  // (run::ProcessRunner). Tests give a run::ScriptedRunner.
  run::Runner* runner = nullptr;
  // Discovery's questions (nvcc --version, python3 -c …); empty: app::tool_probe(), through
  // run::capture and kept in the cache. Tests give canned answers.
  toolchain::Probe probe;

  // The shipped facts (GPUs, platforms, JetPacks, toolchains, recipes), each read once for the
  // session from data_root() unless a test set its own; copies of a session share them.
  mutable std::shared_ptr<const Facts> shared_facts;
  const Facts& facts() const;

  bool color_enabled() const;
};

// A note (hidden by -q), a warning, an error line. Warnings and errors often carry what the user
// typed (or a file's content): they are printed through text::printable.
void note(const Session& s, const std::string& line);
void warn(const Session& s, const std::string& line);
void error_line(const Session& s, const std::string& line);

}  // namespace archbuild::app
