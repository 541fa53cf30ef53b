#include "validate/coverage.hpp"

#include <algorithm>

namespace archbuild::validate {

std::vector<arch::Cc> target_ccs(const std::vector<arch::Arch>& archs) {
  std::vector<arch::Cc> out;
  for (const auto& a : archs)
    if (std::find(out.begin(), out.end(), a.cc) == out.end()) out.push_back(a.cc);
  return out;
}

Coverage coverage(const std::vector<binary::FileReport>& files, const std::vector<arch::Cc>& targets) {
  Coverage cov;
  std::vector<const binary::FileReport*> coded;
  for (const auto& f : files)
    if (f.has_device_code()) coded.push_back(&f);
  cov.files_with_device_code = coded.size();
  cov.covered = !coded.empty();
  for (const auto& cc : targets) {
    TargetCoverage t;
    t.cc = cc;
    t.worst = arch::RunResult::native;
    for (const auto* f : coded) {
      FileVerdict fv;
      fv.path = f->path;
      fv.carried = f->code_images();
      fv.relocatable_only = fv.carried.empty() && !f->relocatable_images().empty();
      fv.verdict = arch::run_verdict(fv.carried, cc);
      t.worst = std::max(t.worst, fv.verdict.result);  // RunResult is ordered best to worst
      t.files.push_back(std::move(fv));
    }
    if (coded.empty()) t.worst = arch::RunResult::no_kernel_image;
    t.covered = !coded.empty() && t.worst != arch::RunResult::no_kernel_image;
    cov.covered = cov.covered && t.covered;
    cov.targets.push_back(std::move(t));
  }
  return cov;
}

}  // namespace archbuild::validate
