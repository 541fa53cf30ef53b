// Hostile input (issue 47) in detect/: a library the environment names by path is checked as an
// input path is before dlopen reads it (a FIFO there hung detect and doctor).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>

#include "arch/arch_data.hpp"
#include "detect/detect.hpp"
#include "support/tempdir.hpp"

using namespace archbuild;

TEST_CASE("hostile/environment: a FIFO named as the NVML or CUDA library is refused, not opened", "[detect]") {
  test::TempDir tmp;
  auto fifo = tmp / "libnvidia-ml.so.1";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  detect::DetectOptions o;
  o.nvml_library = fifo.string();
  o.cuda_library = fifo.string();
  o.smi = [](const std::vector<std::string>&) -> Result<std::pair<int, std::string>> {
    return Error::missing_tool("no nvidia-smi");
  };
  auto t0 = std::chrono::steady_clock::now();
  auto d = detect::detect(arch::ArchData::shipped(), o);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(d.gpus.empty());
  REQUIRE(d.tried.size() >= 2);
  CHECK(d.tried[0].rfind("nvml:", 0) == 0);
  CHECK(d.tried[0].find("FIFO") != std::string::npos);
  CHECK(d.tried[1].find("FIFO") != std::string::npos);
}
