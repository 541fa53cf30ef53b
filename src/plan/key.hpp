// The build key's inputs, typed: everything that shapes the wheel and nothing that only locates
// things (paths, the jobs count, the cache, the time). The key is the SHA-256 of their canonical
// JSON (`to_json`, then plan::build_key); the plan keeps that document as `key_inputs`.
//
// Versioned. `format` is the version of the serialisation below; it is written into every key,
// and a change that would give an existing build another key is a new format. Within format 1,
// one rule lets inputs be added without moving old keys:
//
//   A field added after format 1 (marked "added" below) is written only where it differs from
//   its default, the value every build had before the field existed (`is_default`). Fields of
//   format 1 itself are always written, null where unset.
//
// So a build that does not use a newer input keeps the key it had before that input existed.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace archbuild::plan {

struct PlanData;

struct KeyInputs {
  static constexpr int kFormat = 1;
  int format = kFormat;

  std::string package;  // the wheel's distribution name
  std::string module;
  std::string version;  // the wheel version, local label included
  std::string driver;   // recipe::to_string(Driver): its steps and stages follow from it

  // Where the source comes from: a repository at a tag (and the commit, once pinned), or a local
  // tree by content (the same tree elsewhere is the same build).
  struct Repository {
    std::string url, tag;
    std::optional<std::string> commit;
    bool submodules;  // recursive (no initializer here: a nested default is not usable by the variant)
    bool operator==(const Repository&) const = default;
  };
  struct LocalTree {
    std::string content_hash;
    bool operator==(const LocalTree&) const = default;
  };
  std::variant<Repository, LocalTree> source;

  struct Cuda {
    std::string release;  // X.Y
    std::string nvcc;     // the compiler's own version: the toolkit's path stands for nothing
  } cuda;
  struct Compiler {
    std::string kind, version;  // not its path
  } host_compiler;
  std::string python;  // X.Y
  struct ArchList {
    std::string env, value;  // the variable the build reads, in the recipe's syntax
  } arch_list;
  std::map<std::string, std::string> env;  // the keyed variables of the build's environment
  struct Step {
    std::string stage, tool;  // the program by role, not by path
    std::vector<std::string> args;
    std::string cwd;
  };
  std::vector<Step> steps;
  std::string build_dir, wheel_dir;

  // ---- added after format 1 (written only where not default: the rule above)

  // PEP 517 config settings, by name as well as inside the step's args. Default: none.
  std::vector<std::pair<std::string, std::string>> config_settings;
  // The package stage's repair, the recipe's [wheel] table (stages/portable). Default: official
  // layout, no triton requirement.
  struct Wheel {
    std::string layout = "official";
    std::optional<std::string> triton;
    bool operator==(const Wheel&) const = default;
  } wheel;
  // The platform built for: its machine and toolkit flavour make another binary. Default:
  // x86_64 (or none named).
  struct Platform {
    std::string name = "x86_64", machine, cuda_target;
  } platform;
  // The optional libraries: name, state, where from and the version — never a path. Default: none.
  struct Library {
    std::string name, library, state;
    std::optional<std::string> origin, version;
  };
  std::vector<Library> libraries;
  // The [[fetch]]es the build would download (the active ones), with their pins. Default: none.
  struct Fetch {
    std::string name, path, url;
    std::vector<std::string> pin_files;
    std::optional<std::string> pin_file, ref, commit;  // null: not resolved yet
    bool submodules = false;                           // added: default false
  };
  std::vector<Fetch> fetches;
  // The build venv: the exact interpreter and the versions of what shapes the binary (not its
  // path, not where pip found them). Default: none (the cmake driver, or not known yet).
  struct InstalledWheel {
    std::string name, version, sha256;  // by content, not by file
  };
  struct BuildVenv {
    std::string interpreter_version;
    bool system_site_packages = false;
    std::map<std::string, std::string> packages;  // binary_shaping_packages() it has
    std::optional<std::string> cmake;             // the version of the cmake every step runs
    std::vector<InstalledWheel> wheels;           // added: default none
  };
  std::optional<BuildVenv> build_venv;
  // The patches applied to the checkout, in order: by content and strip level, never by path
  // (the same patch elsewhere is the same build). Default: none.
  struct Patch {
    std::string sha256;
    int strip = 1;
  };
  std::vector<Patch> patches;

  // Exactly what the key hashes (nlohmann's objects are sorted: the dump is canonical).
  nlohmann::json to_json() const;
  // The 64 hex digits: plan::build_key(to_json()).
  std::string key() const;
};

// The key inputs of a plan whose other fields are decided (make_plan's last step).
KeyInputs key_inputs_of(const PlanData& plan);

}  // namespace archbuild::plan
