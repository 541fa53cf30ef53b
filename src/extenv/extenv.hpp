// `archbuild env`: the environment that builds a CUDA extension (flash-attn, xformers, a
// torchvision checkout …) for exactly the target archs with the installed toolkit, against the
// torch the build's Python imports. A pure function of what the command gathered (the toolkit,
// compilers, the torch probe's answer, the recipes, memory and cores); the printers turn it into
// shell, dotenv, JSON or $GITHUB_ENV text. No process, no file: the CLI does those.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/arch.hpp"
#include "core/error.hpp"
#include "plan/plan.hpp"
#include "recipe/recipe.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::extenv {

// The torch an interpreter would import, read from torch/version.py without importing torch
// (an import may need a driver, take seconds or crash; the version file is what __version__ is).
struct TorchSeen {
  std::string python;               // sys.executable
  std::string version;              // torch.__version__ exactly, local label included
  std::optional<std::string> cuda;  // torch.version.cuda
  std::optional<Version> release() const;  // 2.11.0 from "2.11.0+cu130"
};

// The answer of doctor's torch probe run as `PY -c doctor::kTorchProbeScript --no-import` (the
// version file only: env must not import torch).
// nullopt: the interpreter has no torch package. Error (exit 3): no probe line, or a torch whose
// version file could not be read.
Result<std::optional<TorchSeen>> parse_torch_probe(const std::string& stdout_text, const std::string& python);

struct Request {
  std::vector<arch::Arch> targets;         // --sm, normalized
  std::optional<recipe::Recipe> project;   // --for PROJECT
};

struct Inputs {
  std::optional<toolchain::Toolkit> toolkit;         // the one a build would use (CUDA_HOME first)
  std::vector<toolchain::Toolchain> toolchains;      // toolchains/ data
  const arch::ArchData* arch = nullptr;              // data/gpus.toml (required): CCs a CUDA renamed
  std::vector<toolchain::Compiler> compilers;        // discovered: CUDAHOSTCXX (if set) first, then PATH
  std::optional<TorchSeen> torch;                    // nullopt: the Python has no torch
  std::vector<recipe::Recipe> recipes;               // shipped recipes: torch lines and extensions
  plan::HostResources host;
};

struct Var {
  std::string name;
  std::string value;
  std::string why;  // for humans and --json: where the value comes from
};

struct Environment {
  std::vector<Var> vars;           // in print order
  std::vector<std::string> notes;  // what could not be said exactly, what was assumed
  std::vector<arch::Arch> archs;
  std::string grammar;             // "extension" or "build"
  std::string grammar_of;          // "torch 2.11.0+cu130 (installed)", "torch-2.15 (no torch installed)"
  std::optional<TorchSeen> torch;
  plan::Jobs jobs;
  std::optional<std::string> project;  // the --for recipe's name

  const Var* find(const std::string& name) const;
};

// Refusals: an arch the toolkit cannot compile or the reader cannot spell (exit 2); no toolkit,
// or no host compiler the toolkit accepts (exit 3).
Result<Environment> compute(const Request& request, const Inputs& inputs);

// `export K=V` lines, values shell-quoted where needed.
std::string to_shell(const Environment& e);
// KEY=VALUE lines; values with anything but [A-Za-z0-9_./:+,@%-] in double quotes with \ " $ `
// and newlines escaped.
std::string to_dotenv(const Environment& e);
// One document: {"env": {K: V}, "vars": [...], "notes", "archs", "grammar", "torch", "jobs"}.
nlohmann::json to_json(const Environment& e);
// Lines for $GITHUB_ENV: K=V, or K<<DELIM … DELIM for a value with a newline.
std::string to_github(const Environment& e);
// "torch==<installed version>\n" for `pip install -c FILE`; an error (exit 3) without torch.
Result<std::string> constraints(const Environment& e);

}  // namespace archbuild::extenv
