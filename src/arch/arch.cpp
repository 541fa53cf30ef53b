#include "arch/arch.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace archbuild::arch {

std::string Cc::str() const { return fmt::format("{}.{}", major, minor); }

std::string_view suffix(Variant v) {
  switch (v) {
    case Variant::a: return "a";
    case Variant::f: return "f";
    default: return "";
  }
}

std::string Arch::sm_name() const { return fmt::format("sm_{}{}", cc.sm(), suffix(variant)); }
std::string Arch::compute_name() const {
  return fmt::format("compute_{}{}", sass_from.value_or(cc).sm(), suffix(variant));
}
std::string Arch::cc_name() const { return fmt::format("{}{}", cc.str(), suffix(variant)); }

std::vector<Arch> normalize(std::vector<Arch> archs) {
  std::map<std::tuple<Cc, Variant, Cc>, Arch> merged;
  for (const Arch& a : archs) {
    auto [it, inserted] = merged.try_emplace(a.key(), a);
    if (!inserted) {
      it->second.sass = it->second.sass || a.sass;
      it->second.ptx = it->second.ptx || a.ptx;
    }
  }
  std::vector<Arch> out;
  out.reserve(merged.size());
  for (auto& [k, a] : merged) out.push_back(a);
  return out;
}

Printed to_torch(const std::vector<Arch>& archs) {
  Printed p;
  std::vector<std::string> items;
  for (const Arch& a : archs) {
    std::string item = a.cc_name();
    if (a.sass_from) item = fmt::format("{}({})", a.cc_name(), a.sass_from->str());
    if (a.ptx) item += "+PTX";
    if (a.ptx && !a.sass)
      p.notes.push_back(fmt::format(
          "TORCH_CUDA_ARCH_LIST cannot ask for PTX alone: {} also builds {} SASS", item,
          a.sm_name()));
    items.push_back(item);
  }
  p.text = fmt::format("{}", fmt::join(items, ";"));
  return p;
}

Printed to_cmake(const std::vector<Arch>& archs) {
  Printed p;
  std::vector<std::string> items;
  for (const Arch& a : archs) {
    std::string base = fmt::format("{}{}", a.cc.sm(), suffix(a.variant));
    if (a.sass_from)
      p.notes.push_back(fmt::format("CMAKE_CUDA_ARCHITECTURES cannot say {}({}): printed as {}-real",
                                    a.cc_name(), a.sass_from->str(), base));
    if (a.sass && a.ptx && !a.sass_from)
      items.push_back(base);
    else if (a.sass)
      items.push_back(base + "-real");
    else if (a.ptx)
      items.push_back(base + "-virtual");
    if (a.sass && a.ptx && a.sass_from) items.push_back(base + "-virtual");
  }
  p.text = fmt::format("{}", fmt::join(items, ";"));
  return p;
}

std::vector<std::string> to_nvcc(const std::vector<Arch>& archs) {
  std::vector<std::string> flags;
  for (const Arch& a : archs) {
    if (a.sass)
      flags.push_back(fmt::format("-gencode=arch={},code={}", a.compute_name(), a.sm_name()));
    if (a.ptx) {
      std::string ptx = fmt::format("compute_{}{}", a.cc.sm(), suffix(a.variant));
      flags.push_back(fmt::format("-gencode=arch={},code={}", ptx, ptx));
    }
  }
  return flags;
}

Printed to_spack(const std::vector<Arch>& archs) {
  Printed p;
  std::vector<std::string> items;
  for (const Arch& a : archs) {
    std::string item = fmt::format("{}{}", a.cc.sm(), suffix(a.variant));
    if (items.empty() || items.back() != item) items.push_back(item);
    if (a.ptx)
      p.notes.push_back(fmt::format("Spack's cuda_arch has no PTX switch: {} printed as {}",
                                    a.cc_name() + "+PTX", item));
  }
  p.text = fmt::format("{}", fmt::join(items, ","));
  return p;
}

}  // namespace archbuild::arch
