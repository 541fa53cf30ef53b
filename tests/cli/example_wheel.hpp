// Test helpers for `validate` and `smoke`: the example project's wheel built for one arch, the
// way archbuild's pipeline builds it (setup.py build --cmake-only, cmake --build build,
// setup.py bdist_wheel; version 0.1.0+cuXYZ.smNN), and an environment without a GPU.
//
// ctest runs every test case in a process of its own, so the wheel is cached under the build
// tree (test-fixtures/), keyed by the example's sources, the arch and nvcc's version: a run of
// the suite compiles it once.
#pragma once

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/sha256.hpp"
#include "support/process.hpp"
#include "support/tempdir.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::test {

namespace fs = std::filesystem;

inline const fs::path kNvcc = "/usr/local/cuda/bin/nvcc";
inline const fs::path kSystemPython = "/usr/bin/python3";  // Debian's: venv, pip, setuptools, wheel

// Why the example wheel cannot be built here ("" when it can).
inline std::string example_wheel_unavailable() {
  if (!fs::exists(kNvcc)) return kNvcc.string() + " is absent";
  if (!fs::exists(kSystemPython)) return kSystemPython.string() + " is absent";
  for (const char* tool : {"cmake", "ninja"})
    if (which(tool).empty()) return std::string(tool) + " is not on PATH";
  auto r = run(kSystemPython, {"-c", "import setuptools, wheel, venv, ensurepip"});
  if (r.status != 0) return kSystemPython.string() + " lacks setuptools, wheel or venv";
  return "";
}

// The example's source files (no build outputs), relative paths sorted.
inline std::vector<fs::path> example_files(const fs::path& root) {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    auto name = it->path().filename().string();
    if (it->is_directory() &&
        (name == "build" || name == "dist" || name == "__pycache__" || name.ends_with(".egg-info"))) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    if (name == "libminitorch_kernels.so" || name == "_build_info.json" || name == "version.py") continue;
    out.push_back(fs::relative(it->path(), root));
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline void copy_example(const fs::path& from, const fs::path& to) {
  for (const auto& rel : example_files(from)) {
    fs::create_directories((to / rel).parent_path());
    fs::copy_file(from / rel, to / rel, fs::copy_options::overwrite_existing);
  }
}

// "cu130" for nvcc 13.0.
inline std::string cu_tag() {
  auto r = run(kNvcc, {"--version"});
  auto at = r.out.find("release ");
  if (at == std::string::npos) return "cu0";
  std::string v = r.out.substr(at + 8, r.out.find(',', at) - at - 8);  // "13.0"
  v.erase(std::remove(v.begin(), v.end(), '.'), v.end());
  return "cu" + v;
}

struct ExampleWheel {
  fs::path path;     // the .whl; empty when skipped
  std::string skip;  // why not
  std::string log;   // the build's output when it failed
};

// minitorch built for `cc` ("9.0"): TORCH_CUDA_ARCH_LIST=cc, SASS only.
inline ExampleWheel example_wheel(const std::string& cc = "9.0") {
  ExampleWheel w;
  w.skip = example_wheel_unavailable();
  if (!w.skip.empty()) return w;
  fs::path src = fs::path(ARCHBUILD_SOURCE_DIR) / "examples";
  std::string sm = cc;
  sm.erase(std::remove(sm.begin(), sm.end(), '.'), sm.end());
  std::string version = "0.1.0+" + cu_tag() + ".sm" + sm;

  Sha256 key;
  key.update("minitorch wheel v1\n" + version + "\n");
  for (const char* project : {"minitorch", "minitorch-dep"})
    for (const auto& rel : example_files(src / project)) {
      key.update(std::string(project) + "/" + rel.string() + "\n");
      key.update(read_file(src / project / rel));
    }
  fs::path cache = fs::path(ARCHBUILD_EXE).parent_path().parent_path() / "test-fixtures" /
                   ("minitorch-sm" + sm + "-" + key.hex().substr(0, 16));
  auto find_wheel = [](const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".whl") return e.path();
    return fs::path();
  };
  if (fs::is_directory(cache) && !find_wheel(cache).empty()) {
    w.path = find_wheel(cache);
    return w;
  }

  TempDir tmp;
  fs::path tree = tmp / "minitorch";
  copy_example(src / "minitorch", tree);
  copy_example(src / "minitorch-dep", tree / "third_party" / "minidep");
  RunOptions o;
  o.cwd = tree;
  o.timeout = std::chrono::seconds(900);
  o.env = {{"TORCH_CUDA_ARCH_LIST", cc},
           {"PYTORCH_BUILD_VERSION", version},
           {"MAX_JOBS", "2"},
           {"USE_CUDA", "1"},
           {"BUILD_TEST", "0"},
           {"CUDA_HOME", kNvcc.parent_path().parent_path().string()},
           {"CUDACXX", kNvcc.string()}};
  for (const auto& step : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {kSystemPython.string(), {"setup.py", "build", "--cmake-only"}},
           {which("cmake"), {"--build", "build"}},
           {kSystemPython.string(), {"setup.py", "bdist_wheel"}}}) {
    auto r = run(step.first, step.second, o);
    w.log += r.out + r.err;
    if (r.status != 0) {
      w.skip = "";
      w.log = "the example's build failed: " + step.first + "\n" + w.log;
      return w;  // path empty, skip empty: the caller fails with the log
    }
  }
  fs::path built = find_wheel(tree / "dist");
  if (built.empty()) {
    w.log = "the example's build made no wheel\n" + w.log;
    return w;
  }
  // Publish atomically: another test process may be doing the same.
  fs::create_directories(cache.parent_path());
  fs::path staging = tmp / "staging";
  fs::create_directories(staging);
  fs::copy_file(built, staging / built.filename());
  std::error_code ec;
  fs::rename(staging, cache, ec);  // fails when another process won the race: use theirs
  w.path = find_wheel(cache);
  return w;
}

// A RECORD hash ("sha256=…") of `data`.
inline std::string record_line_hash(const std::string& data) {
  Sha256 h;
  h.update(data);
  return validate::record_hash(h.raw());
}

// Every member of a zip, in order.
inline std::vector<std::pair<std::string, std::string>> unzip(const fs::path& p) {
  std::vector<std::pair<std::string, std::string>> out;
  archive* a = archive_read_new();
  archive_read_support_format_zip(a);
  if (archive_read_open_filename(a, p.c_str(), 1 << 16) != ARCHIVE_OK) {
    archive_read_free(a);
    return out;
  }
  archive_entry* e = nullptr;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string data;
    char buf[1 << 16];
    for (la_ssize_t n; (n = archive_read_data(a, buf, sizeof buf)) > 0;) data.append(buf, static_cast<std::size_t>(n));
    out.emplace_back(archive_entry_pathname(e), std::move(data));
  }
  archive_read_free(a);
  return out;
}

// Environment pieces that hide every GPU from archbuild's detection (a failing nvidia-smi
// first on PATH, the driver libraries pointed at nothing), so results do not depend on the host.
inline RunOptions no_gpu(const TempDir& dir) {
  auto smi = dir.write("nogpu-bin/nvidia-smi", "#!/bin/sh\necho 'NVIDIA-SMI has failed (test: no GPU)' >&2\nexit 9\n");
  fs::permissions(smi, fs::perms::owner_all);
  RunOptions o;
  const char* path = std::getenv("PATH");
  o.env["PATH"] = (dir / "nogpu-bin").string() + ":" + (path ? path : "/usr/bin:/bin");
  o.env["ARCHBUILD_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1";
  o.env["ARCHBUILD_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1";
  o.timeout = std::chrono::seconds(600);
  return o;
}

// The check called `name` in a validate/smoke --json report (the test fails without it).
inline const nlohmann::json& check_of(const nlohmann::json& doc, const std::string& name) {
  for (const auto& c : doc["checks"])
    if (c["name"] == name) return c;
  FAIL("no check " << name << " in " << doc.dump(2));
  return doc;
}

}  // namespace archbuild::test
