// The built binary: `archbuild arch`, `archbuild gpus`, global flags and exit statuses.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"

namespace t = archbuild::test;

TEST_CASE("arch: default output is TORCH_CUDA_ARCH_LIST on stdout", "[cli]") {
  auto r = t::archbuild({"arch", "9.0;8.0 8.6+PTX"});
  CHECK(r.status == 0);
  CHECK(r.out == "8.0;8.6+PTX;9.0\n");
  CHECK(r.err.empty());
}

TEST_CASE("arch: the README's command", "[cli]") {
  auto r = t::archbuild({"arch", "Hopper", "--format", "nvcc"});
  CHECK(r.status == 0);
  CHECK(r.out == "-gencode=arch=compute_90,code=sm_90\n");
}

TEST_CASE("arch: nvcc format prints one -gencode per image", "[cli]") {
  auto r = t::archbuild({"arch", "8.0 8.6+PTX", "--format", "nvcc"});
  CHECK(r.status == 0);
  CHECK(r.out ==
        "-gencode=arch=compute_80,code=sm_80\n"
        "-gencode=arch=compute_86,code=sm_86\n"
        "-gencode=arch=compute_86,code=compute_86\n");
}

TEST_CASE("arch: cmake and spack formats, several arguments", "[cli]") {
  auto r = t::archbuild({"arch", "80", "86", "9.0+PTX", "--format", "cmake"});
  CHECK(r.status == 0);
  CHECK(r.out == "80-real;86-real;90\n");
  r = t::archbuild({"arch", "sm_80,sm_90a", "--format", "spack"});
  CHECK(r.out == "80,90a\n");
}

TEST_CASE("arch: --parser extension expands names with PTX", "[cli]") {
  auto r = t::archbuild({"arch", "Ampere", "--parser", "extension"});
  CHECK(r.out == "8.0;8.6+PTX\n");
  r = t::archbuild({"arch", "Ampere"});
  CHECK(r.out == "8.0;8.6\n");
}

TEST_CASE("arch: --json is one document with archs and every syntax", "[cli]") {
  for (auto args : {std::vector<std::string>{"arch", "9.0+PTX", "sm_80", "--json"},
                    std::vector<std::string>{"--json", "arch", "9.0+PTX", "sm_80"},
                    std::vector<std::string>{"arch", "9.0+PTX", "sm_80", "--format", "json"}}) {
    auto r = t::archbuild(args);
    REQUIRE(r.status == 0);
    auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["archs"].size() == 2);
    CHECK(j["archs"][0]["cc"] == "8.0");
    CHECK(j["archs"][0]["variant"] == "");
    CHECK(j["archs"][0]["sass"] == true);
    CHECK(j["archs"][0]["ptx"] == false);
    CHECK(j["archs"][1]["ptx"] == true);
    CHECK(j["torch"] == "8.0;9.0+PTX");
    CHECK(j["cmake"] == "80-real;90");
    CHECK(j["nvcc"].size() == 3);
  }
}

TEST_CASE("arch: bad input is exit 2 with one line naming the token", "[cli]") {
  struct Case { const char* input; const char* expect; };
  for (auto c : {Case{"9.5", "9.0, 10.0"}, Case{"12.3", "12.1"}, Case{"Hoper", "Hopper"},
                 Case{"sm_9", "sm_9"}, Case{"+PTX", "+PTX"}, Case{"native", "archbuild detect"}}) {
    auto r = t::archbuild({"arch", c.input});
    INFO(c.input << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

// The README's nvcc spellings, as typed after `archbuild arch` (CLI11 took them for options).
TEST_CASE("arch: nvcc's -gencode and -arch= spellings work without --", "[cli]") {
  struct Case {
    std::vector<std::string> args;
    std::string torch;
  };
  const std::vector<Case> cases = {
      {{"-gencode", "arch=compute_90,code=sm_90"}, "9.0"},
      {{"-arch=sm_90"}, "9.0+PTX"},
      {{"-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"}, "8.0;9.0+PTX"},
      {{"-gencode=arch=compute_90,code=sm_90", "8.0"}, "8.0;9.0"},
      {{"--generate-code", "arch=compute_90,code=sm_90"}, "9.0"},
      {{"--gpu-architecture=sm_90"}, "9.0+PTX"},
      {{"-arch", "sm_90"}, "9.0+PTX"},
      {{"--", "-gencode", "arch=compute_90,code=sm_90"}, "9.0"},  // with -- as before
      {{"9.0", "--", "-arch=sm_80"}, "8.0+PTX;9.0"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"arch"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = t::archbuild(args);
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.out == c.torch + "\n");
    // The command's own options still apply, before or after the list.
    args.insert(args.begin() + 1, {"--format", "cmake"});
    CHECK(t::archbuild(args).status == 0);
  }
  auto nvcc = t::archbuild({"arch", "--format", "nvcc", "90"});
  CHECK(nvcc.status == 0);
  CHECK(nvcc.out == "-gencode=arch=compute_90,code=sm_90\n");
  auto j = t::archbuild({"arch", "-arch=sm_90", "--json"});
  REQUIRE(j.status == 0);
  CHECK(nlohmann::json::parse(j.out)["torch"] == "9.0+PTX");
  auto unbalanced = t::archbuild({"arch", "-gencode", "arch=compute_90,code=[sm_90"});
  CHECK(unbalanced.status == 2);
  CHECK(unbalanced.err.find("without its ']'") != std::string::npos);
}

TEST_CASE("arch: what the user typed comes back quoted, escaped and cut", "[cli]") {
  auto r = t::archbuild({"arch", "\x1b[2J\x07" + std::string(100000, 'A')});  // no ; , or space: one item
  CHECK(r.status == 2);
  CHECK(r.err.size() < 1000);
  CHECK(r.err.find('\x1b') == std::string::npos);
  CHECK(r.err.find("\\x1b[2J\\x07AAA") != std::string::npos);
  CHECK(r.err.find("more bytes)") != std::string::npos);
}

TEST_CASE("arch: usage errors are exit 2", "[cli]") {
  CHECK(t::archbuild({"arch"}).status == 2);
  CHECK(t::archbuild({"arch", "9.0", "--format", "yaml"}).status == 2);
  CHECK(t::archbuild({"arch", "9.0", "--parser", "nope"}).status == 2);
  CHECK(t::archbuild({"no-such-command"}).status == 2);
  CHECK(t::archbuild({}).status == 2);
}

TEST_CASE("gpus: the table, a match, and no match", "[cli]") {
  auto all = t::archbuild({"gpus"});
  CHECK(all.status == 0);
  CHECK(all.out.find("RTX 5090") != std::string::npos);
  CHECK(all.out.find("Blackwell") != std::string::npos);
  auto one = t::archbuild({"gpus", "nvidia geforce rtx 4090"});
  CHECK(one.status == 0);
  CHECK(one.out.find("8.9") != std::string::npos);
  CHECK(one.out.find("Ada Lovelace") != std::string::npos);
  auto j = nlohmann::json::parse(t::archbuild({"gpus", "NVIDIA H100 80GB HBM3", "--json"}).out);
  REQUIRE(j["gpus"].size() == 1);
  CHECK(j["gpus"][0]["cc"] == "9.0");
  CHECK(j["gpus"][0]["architecture"] == "Hopper");
  auto none = t::archbuild({"gpus", "H1OO"});
  CHECK(none.status == 1);
  CHECK(none.err.find("H100") != std::string::npos);
  auto none_json = t::archbuild({"gpus", "Voodoo5", "--json"});
  CHECK(none_json.status == 1);
  CHECK(nlohmann::json::parse(none_json.out)["gpus"].empty());
}

TEST_CASE("version and help flags", "[cli]") {
  auto v = t::archbuild({"--version"});
  CHECK(v.status == 0);
  CHECK(v.out.find("archbuild ") == 0);
  for (const char* cmd : {"arch", "gpus"}) {
    auto h = t::archbuild({cmd, "--help"});
    CHECK(h.status == 0);
    CHECK(h.out.find("--json") != std::string::npos);
  }
}

TEST_CASE("a broken data file is one clear line, exit 2", "[cli]") {
  archbuild::test::RunOptions o;
  o.env["ARCHBUILD_DATA_DIR"] = "/nonexistent-archbuild-data";
  auto r = t::archbuild({"arch", "9.0"}, o);
  CHECK(r.status == 2);
  CHECK(r.err.find("gpus.toml") != std::string::npos);
}

TEST_CASE("arch --cuda: a CC that CUDA release renamed is printed by its new name, with a note", "[cli][arm]") {
  // Jetson Thor's 10.1 is 11.0 from CUDA 13.0 (before: 10.1, which CUDA 13 cannot compile).
  for (const char* spec : {"10.1", "Blackwell+Tegra"}) {
    auto r = t::archbuild({"arch", spec, "--cuda", "13.0"});
    INFO(spec << ": " << r.err);
    CHECK(r.status == 0);
    CHECK(r.out == "11.0\n");
    CHECK(r.err.find("10.1 is 11.0 for CUDA 13.0") != std::string::npos);
  }
  auto old = t::archbuild({"arch", "10.1", "--cuda", "12.9"});  // the name CUDA 12 compiles
  CHECK(old.out == "10.1\n");
}
