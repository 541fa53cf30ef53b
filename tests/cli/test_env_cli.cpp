// `archbuild env`: every format carries the same environment; the installed torch (a look-alike
// torch/version.py on PYTHONPATH) is pinned by --constraints; refusals are one line with exit 2;
// and examples/minivision, built against the minitorch wheel with exactly env's output (dotenv,
// json), compiles its kernel for exactly the requested archs (`archbuild inspect`), and refuses
// another minitorch.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>

#include "cli/example_wheel.hpp"

using namespace archbuild;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using Env = std::map<std::string, std::string>;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string why_not_here() {
  if (!fs::exists(test::kNvcc)) return test::kNvcc.string() + " is absent (env needs an installed toolkit)";
  return "";
}

#define NVCC_OR_SKIP()                                \
  if (auto why = why_not_here(); !why.empty()) {      \
    WARN("##archbuild-skip## " << why);               \
    return;                                           \
  }

// The environment the command runs in: this toolkit, no GPU, a Python without torch unless the
// test adds one on PYTHONPATH.
test::RunOptions options(const test::TempDir& dir) {
  auto o = test::no_gpu(dir);
  o.env["CUDA_HOME"] = test::kNvcc.parent_path().parent_path().string();
  o.env["PYTHONPATH"] = (dir / "empty-site").string();
  o.unset_env = {"CUDAHOSTCXX", "TORCH_CUDA_ARCH_LIST"};
  return o;
}

// KEY=VALUE or KEY="escaped", as to_dotenv writes (and dotenv readers read).
Env parse_dotenv(const std::string& text) {
  Env out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    REQUIRE(eq != std::string::npos);
    std::string k = line.substr(0, eq), v = line.substr(eq + 1), val;
    if (!v.empty() && v.front() == '"') {
      REQUIRE(v.back() == '"');
      for (std::size_t i = 1; i + 1 < v.size(); ++i) {
        if (v[i] == '\\' && i + 2 < v.size()) {
          char c = v[++i];
          val += c == 'n' ? '\n' : c;
        } else {
          val += v[i];
        }
      }
    } else {
      val = v;
    }
    out[k] = val;
  }
  return out;
}

// $GITHUB_ENV lines: K=V, or K<<DELIM … DELIM.
Env parse_github(const std::string& text) {
  Env out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (auto h = line.find("<<"); h != std::string::npos && line.find('=') == std::string::npos) {
      std::string k = line.substr(0, h), delim = line.substr(h + 2), v;
      for (std::string l; std::getline(in, l) && l != delim;) v += (v.empty() ? "" : "\n") + l;
      out[k] = v;
      continue;
    }
    auto eq = line.find('=');
    REQUIRE(eq != std::string::npos);
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// MAX_JOBS follows the memory available at each call: compared apart.
Env without_jobs(Env e) {
  CHECK(std::stoi(e.at("MAX_JOBS")) >= 1);
  e.erase("MAX_JOBS");
  return e;
}

Env from_json(const std::string& text) {
  auto j = json::parse(text);
  Env out;
  for (auto& [k, v] : j["env"].items()) out[k] = v.get<std::string>();
  return out;
}

// The shell format, evaluated by bash: the values it exports.
Env from_shell(const std::string& text, const Env& names, const test::TempDir& dir) {
  auto script = dir.write("env.sh", text);
  std::string cmd = ". " + script.string();
  for (const auto& [k, v] : names) cmd += "; printf '%s\\0' \"$" + k + "\"";
  auto r = test::run(test::which("bash"), {"-c", cmd});
  REQUIRE(r.status == 0);
  Env out;
  std::size_t at = 0;
  for (const auto& [k, v] : names) {
    auto end = r.out.find('\0', at);
    REQUIRE(end != std::string::npos);
    out[k] = r.out.substr(at, end - at);
    at = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("env: shell, dotenv, json and github carry the same environment") {
  NVCC_OR_SKIP();
  test::TempDir dir;
  auto o = options(dir);
  auto dotenv = test::archbuild({"env", "--sm", "8.0,9.0+PTX", "--format", "dotenv"}, o);
  INFO(dotenv.err);
  REQUIRE(dotenv.status == 0);
  Env want = parse_dotenv(dotenv.out);
  CHECK(want.at("TORCH_CUDA_ARCH_LIST") == "8.0;9.0+PTX");
  CHECK(want.at("CMAKE_CUDA_ARCHITECTURES") == "80-real;90");
  CHECK(want.at("FLASH_ATTN_CUDA_ARCHS") == "80;90");
  CHECK(want.at("CUDA_HOME") == test::kNvcc.parent_path().parent_path().string());
  CHECK(std::stoi(want.at("MAX_JOBS")) >= 1);
  CHECK(std::stoi(want.at("NVCC_THREADS")) >= 1);
  CHECK(contains(dotenv.err, "no torch is installed"));

  auto js = test::archbuild({"env", "--sm", "8.0,9.0+PTX", "--format", "json"}, o);
  REQUIRE(js.status == 0);
  CHECK(without_jobs(from_json(js.out)) == without_jobs(want));
  auto j = json::parse(js.out);
  CHECK(j["grammar"] == "extension");
  CHECK(j["torch"].is_null());
  // --json is the same document.
  auto js2 = test::archbuild({"env", "--sm", "8.0,9.0+PTX", "--json"}, o);
  REQUIRE(js2.status == 0);
  CHECK(without_jobs(from_json(js2.out)) == without_jobs(want));

  auto gh = test::archbuild({"env", "--sm", "8.0,9.0+PTX", "--format", "github"}, o);
  REQUIRE(gh.status == 0);
  CHECK(without_jobs(parse_github(gh.out)) == without_jobs(want));

  auto sh = test::archbuild({"env", "--sm", "8.0,9.0+PTX"}, o);  // shell is the default
  REQUIRE(sh.status == 0);
  CHECK(contains(sh.out, "export TORCH_CUDA_ARCH_LIST='8.0;9.0+PTX'\n"));
  if (!test::which("bash").empty()) CHECK(without_jobs(from_shell(sh.out, want, dir)) == without_jobs(want));
}

TEST_CASE("env: the installed torch's exact version goes into --constraints") {
  NVCC_OR_SKIP();
  test::TempDir dir;
  auto o = options(dir);
  dir.write("site/torch/__init__.py", "raise ImportError('env must not import torch')\n");
  dir.write("site/torch/version.py", "__version__ = '2.11.0+cu130.sm90'\ncuda = '13.0'\n");
  o.env["PYTHONPATH"] = (dir / "site").string();
  auto file = dir / "constraints.txt";
  auto r = test::archbuild({"env", "--sm", "90", "--json", "--constraints", file.string()}, o);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(test::read_file(file) == "torch==2.11.0+cu130.sm90\n");
  auto j = json::parse(r.out);
  CHECK(j["torch"]["version"] == "2.11.0+cu130.sm90");
  CHECK(contains(j["grammar_of"].get<std::string>(), "torch 2.11.0+cu130.sm90"));
  CHECK(j["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0");
  // Without a torch there is nothing to pin: exit 3.
  auto none = test::archbuild({"env", "--sm", "90", "--constraints", file.string()}, options(dir));
  CHECK(none.status == 3);
  CHECK(contains(none.err, "no torch is installed"));
}

TEST_CASE("env refuses archs the toolkit cannot compile, and flash-attn targets it builds nothing for") {
  NVCC_OR_SKIP();
  test::TempDir dir;
  auto o = options(dir);
  auto old = test::archbuild({"env", "--sm", "70"}, o);
  CHECK(old.status == 2);
  CHECK(old.out.empty());
  CHECK(contains(old.err, "cannot compile sm_70"));
  auto fa = test::archbuild({"env", "--sm", "75", "--for", "flash-attn"}, o);
  CHECK(fa.status == 2);
  CHECK(contains(fa.err, "FLASH_ATTN_CUDA_ARCHS (flash-attn-2.8) builds nothing that runs on 7.5"));
  auto bad = test::archbuild({"env", "--sm", "90", "--format", "yaml"}, o);
  CHECK(bad.status == 2);
  auto unknown = test::archbuild({"env", "--sm", "90", "--for", "no-such-project"}, o);
  CHECK(unknown.status == 2);
}

namespace {

// The minitorch wheel unpacked into a site folder (what `pip install` would leave).
fs::path install_wheel(const fs::path& wheel, const fs::path& site) {
  for (const auto& [name, data] : test::unzip(wheel)) {
    fs::path p = site / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
  }
  return site;
}

// examples/minivision built with `env` (the variables env printed), minitorch from `site`.
test::Ran build_minivision(const Env& env, const fs::path& site, const fs::path& tree) {
  test::copy_example(fs::path(ARCHBUILD_SOURCE_DIR) / "examples" / "minivision", tree);
  test::RunOptions o;
  o.cwd = tree;
  o.timeout = std::chrono::seconds(600);
  o.env = env;
  o.env["PYTHONPATH"] = site.string();
  o.unset_env = {"CUDAHOSTCXX"};
  return test::run(test::kSystemPython.string(), {"setup.py", "build"}, o);
}

std::vector<std::string> strings(const json& j) { return j.get<std::vector<std::string>>(); }

}  // namespace

TEST_CASE("env: the example dependent built with exactly env's output carries exactly those archs", "[cli][env][nvcc]") {
  auto w = test::example_wheel("9.0");
  if (!w.skip.empty()) {
    WARN("##archbuild-skip## " << w.skip);
    return;
  }
  INFO(w.log);
  REQUIRE(!w.path.empty());
  test::TempDir dir;
  fs::path site = install_wheel(w.path, dir / "site");
  REQUIRE(fs::exists(site / "minitorch" / "include" / "minitorch" / "version.h"));
  auto o = options(dir);

  struct Case {
    std::string sm, format;
    std::vector<std::string> sass, ptx;
  };
  for (const Case& c : {Case{"8.0,9.0+PTX", "dotenv", {"sm_80", "sm_90"}, {"compute_90"}},
                        Case{"120", "json", {"sm_120"}, {}}}) {
    INFO(c.sm << " via " << c.format);
    auto e = test::archbuild({"env", "--sm", c.sm, "--format", c.format, "--python", test::kSystemPython.string()}, o);
    INFO(e.err);
    REQUIRE(e.status == 0);
    Env env = c.format == "json" ? from_json(e.out) : parse_dotenv(e.out);
    fs::path tree = dir / ("minivision-" + c.format);
    auto b = build_minivision(env, site, tree);
    INFO(b.out << b.err);
    REQUIRE(b.status == 0);
    fs::path so = tree / "build" / "native" / "_ops.so";
    REQUIRE(fs::exists(so));
    // Built against the wheel's minitorch, read through its installed header.
    CHECK(contains(test::read_file(tree / "build" / "native" / "built_against.txt"), "0.1.0+"));
    auto in = test::archbuild({"inspect", "--json", so.string()}, o);
    INFO(in.err);
    REQUIRE(in.status == 0);
    auto j = json::parse(in.out);
    REQUIRE(j["files"].size() == 1);
    CHECK(strings(j["files"][0]["sass"]) == c.sass);
    CHECK(strings(j["files"][0]["ptx"]) == c.ptx);
  }
}

TEST_CASE("env: the example dependent refuses another minitorch, naming the version it found") {
  if (!fs::exists(test::kSystemPython)) {
    WARN("##archbuild-skip## " << test::kSystemPython << " is absent");
    return;
  }
  test::TempDir dir;
  dir.write("site/minitorch/__init__.py", "__version__ = '0.2.0+cu130.sm90'\n");
  auto b = build_minivision({{"TORCH_CUDA_ARCH_LIST", "9.0"}}, dir / "site", dir / "tree");
  CHECK(b.status != 0);
  CHECK(contains(b.err, "found minitorch 0.2.0+cu130.sm90"));
  CHECK(contains(b.err, "builds only against minitorch 0.1.0"));
  // No minitorch at all: says how to get one.
  auto none = build_minivision({{"TORCH_CUDA_ARCH_LIST", "9.0"}}, dir / "empty", dir / "tree2");
  CHECK(none.status != 0);
  CHECK(contains(none.err, "cannot import minitorch"));
}
