#include "app/inspect.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "app/inputs.hpp"
#include "app/torch.hpp"
#include "core/text.hpp"

namespace archbuild::app {

namespace fs = std::filesystem;

namespace {

std::string uncovered_line(const validate::Coverage& cov) {
  if (cov.files_with_device_code == 0) return "no input carries device code";
  std::vector<std::string> missing;
  for (const auto& t : cov.targets) {
    if (t.covered) continue;
    std::vector<std::string> lacking;
    for (const auto& fv : t.files)
      if (fv.verdict.result == arch::RunResult::no_kernel_image) lacking.push_back(fs::path(fv.path).filename().string());
    std::string who = text::join(
        std::vector<std::string>(lacking.begin(), lacking.begin() + std::min<std::size_t>(3, lacking.size())), ", ");
    if (lacking.size() > 3) who += fmt::format(" and {} more", lacking.size() - 3);
    missing.push_back(fmt::format("{} in {}", t.cc.str(), who));
  }
  return fmt::format("no kernel image for {} (see DETAIL)", text::join(missing, "; "));
}

}  // namespace

Inspected inspect(const InspectRequest& q, const Session& s) {
  std::vector<arch::Cc> targets;  // bad --sm: exit 2 before any file is read
  if (!q.sm.empty()) targets = validate::target_ccs(sm_targets(q.sm, s.facts().arch()).take());

  std::vector<fs::path> inputs(q.paths.begin(), q.paths.end());
  if (!q.python.empty()) inputs.push_back(torch_lib_dir(q.python));
  if (inputs.empty())
    throw Failure(Error::bad_input("inspect: nothing to inspect (give a file, a wheel, a directory or --python PY)"));

  binary::InspectOptions options;
  options.verify = q.verify;
  options.threads = q.threads;
  Inspected out;
  for (const auto& in : inputs) {
    auto got = binary::inspect_path(in, options).take();  // malformed or unreadable: exit 2
    for (auto& f : got.files) out.files.push_back(std::move(f));
    for (auto& sk : got.skipped) out.skipped.push_back(std::move(sk));
  }
  if (!targets.empty()) out.coverage = validate::coverage(out.files, targets);
  for (const auto& f : out.files) out.problems += f.problems.size();
  if (out.coverage && !out.coverage->covered) out.not_covered = uncovered_line(*out.coverage);
  return out;
}

}  // namespace archbuild::app
