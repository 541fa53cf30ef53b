#include "cli/host.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "core/text.hpp"
#include "run/capture.hpp"

namespace archbuild::cli {

detect::Detection detect_host(const arch::ArchData& data, const std::string& only_source) {
  detect::DetectOptions o;
  o.only = only_source;
  if (const char* p = std::getenv("ARCHBUILD_NVML_LIBRARY")) o.nvml_library = p;
  if (const char* p = std::getenv("ARCHBUILD_CUDA_LIBRARY")) o.cuda_library = p;
  // The job's GPUs: NVML ignores these, CUDA (and every child archbuild starts) does not.
  if (const char* p = std::getenv("CUDA_VISIBLE_DEVICES")) o.visible_devices = p;
  if (const char* p = std::getenv("CUDA_DEVICE_ORDER")) o.device_order = p;
  o.smi = [](const std::vector<std::string>& argv) -> Result<std::pair<int, std::string>> {
    run::CaptureOptions co;
    co.timeout = std::chrono::seconds(20);
    auto r = run::capture(argv, co);
    if (!r) return r.error();
    if (r->timed_out) return Error::missing_tool("timed out after 20 s");
    return std::pair{r->status, r->status == 0 ? r->out : r->err + r->out};
  };
  return detect::detect(data, o);
}

Result<std::vector<arch::Arch>> parse_targets(const std::vector<std::string>& values,
                                              const arch::ArchData& data, arch::Grammar grammar,
                                              std::optional<Version> cuda) {
  arch::ParseOptions o;
  o.grammar = grammar;
  o.cuda = std::move(cuda);
  o.keyword = [&data](std::string_view kw) -> Result<std::vector<arch::Arch>> {
    std::string k = text::lower(kw);
    if (k != "native")
      return Error::bad_input(fmt::format(
          "'{}' is not a target: it depends on a toolkit's list; name the CCs to build for (e.g. --sm 8.0,9.0)", kw));
    auto d = detect_host(data);
    if (d.gpus.empty())
      return Error::missing_tool(fmt::format("--sm native: no GPU found on this host ({}); see `archbuild detect`, or give the CC, e.g. --sm 90",
                                             text::join(d.tried, "; ")));
    std::vector<arch::Arch> out;
    for (const auto& g : d.gpus) out.push_back({g.cc, arch::Variant::none, true, false, std::nullopt});
    return out;
  };
  return arch::parse_arch_lists(values, data, o);
}

}  // namespace archbuild::cli
