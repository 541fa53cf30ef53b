// archbuild arch LIST… — normalise an architecture list and print it in another syntax.
#include <fmt/format.h>

#include "arch/arch_data.hpp"
#include "arch/parse.hpp"
#include "app/inputs.hpp"
#include "cli/context.hpp"
#include "core/text.hpp"
#include "toolchain/toolchain.hpp"

namespace archbuild::cli {

namespace {

struct ArchOptions {
  std::vector<std::string> lists;
  std::string parser = "build";
  std::string format = "torch";
  std::string cuda;  // the CUDA the list is for (names like Rubin need a new enough one)
};

arch::Grammar grammar_of(const std::string& s) {
  if (s == "extension") return arch::Grammar::extension;
  if (s == "cmake") return arch::Grammar::cmake;
  return arch::Grammar::build;
}

nlohmann::json arch_json(const std::vector<arch::Arch>& archs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& a : archs) {
    nlohmann::json j = {{"cc", a.cc.str()},
                        {"variant", std::string(arch::suffix(a.variant))},
                        {"sass", a.sass},
                        {"ptx", a.ptx}};
    if (a.sass_from) j["sass_from"] = a.sass_from->str();
    list.push_back(j);
  }
  return list;
}

void run_arch(const ArchOptions& o, Context& ctx) {
  const auto& data = ctx.facts().arch();
  arch::ParseOptions po{grammar_of(o.parser), {}};
  po.cuda = app::cuda_release(o.cuda);
  if (o.lists.empty())
    throw Failure(Error::bad_input("arch: give at least one architecture, e.g. `archbuild arch 9.0` or "
                                   "`archbuild arch -gencode arch=compute_90,code=sm_90`"));
  auto archs = arch::parse_arch_lists(o.lists, data, po).take();
  // For a CUDA release that renamed a CC (13.0: 10.1 is 11.0), the list it compiles says the new name.
  if (po.cuda)
    for (const auto& tc : ctx.facts().toolchains())
        if (tc.cuda == *po.cuda)
          for (auto& a : archs)
            if (auto r = tc.renamed(a, data)) {
              note(ctx, fmt::format("note: {} is {} for CUDA {} (renamed; data/gpus.toml)", a.cc_name(), r->cc_name(),
                                    po.cuda->str()));
              a = *r;
            }
  auto torch = arch::to_torch(archs);
  auto cmake = arch::to_cmake(archs);
  auto spack = arch::to_spack(archs);
  auto nvcc = arch::to_nvcc(archs);
  if (ctx.json || o.format == "json") {
    print_json({{"archs", arch_json(archs)},
                {"torch", torch.text},
                {"cmake", cmake.text},
                {"spack", spack.text},
                {"nvcc", nvcc}});
    return;
  }
  const arch::Printed* printed = nullptr;
  if (o.format == "torch") printed = &torch;
  else if (o.format == "cmake") printed = &cmake;
  else if (o.format == "spack") printed = &spack;
  if (printed) {
    for (const auto& n : printed->notes) warn(ctx, n);
    out(printed->text);
  } else {
    for (const auto& f : nvcc) out(f);
  }
}

}  // namespace

void add_arch_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<ArchOptions>();
  auto* cmd = app.add_subcommand("arch", "Normalise architecture specs and print them as TORCH_CUDA_ARCH_LIST, "
                                         "CMAKE_CUDA_ARCHITECTURES or nvcc flags");
  // nvcc's own spellings (-gencode arch=…, -arch=sm_90) start with '-', so CLI11 would read them
  // as unknown options and refuse them unless they follow `--`. Every word that is not one of
  // this command's options is kept, in order, as an extra: LIST's check sends each positional
  // there too (validate_positionals), so `-gencode` stays next to its value, and LIST — never
  // filled — also makes `--` an extra rather than the end of this command's arguments.
  cmd->add_option("LIST", o->lists,
                  "Arch specs: 9.0, 90, sm_90a, compute_90, 12.0f, 9.0+PTX, 90-real, 8.6(8.0), Hopper, "
                  "nvcc's -gencode arch=compute_90,code=sm_90 and -arch=sm_90; separated by ; , or spaces")
      ->check([](const std::string&) { return std::string("kept in order with the nvcc flags"); });
  cmd->validate_positionals();
  cmd->allow_extras();
  cmd->fallthrough(false);  // an unknown word is a list item here, not a global option
  cmd->add_option("--parser", o->parser,
                  "How names and bare numbers read: build (PyTorch's CMake), extension "
                  "(torch.utils.cpp_extension), cmake (CMAKE_CUDA_ARCHITECTURES)")
      ->check(CLI::IsMember({"build", "extension", "cmake"}));
  cmd->add_option("--cuda", o->cuda,
                  "The CUDA release the list is for (X.Y): refuses names PyTorch knows only from a newer one "
                  "(Rubin: 13.4)");
  cmd->add_option("--format", o->format, "Output: torch, cmake, nvcc, spack or json")
      ->check(CLI::IsMember({"torch", "cmake", "nvcc", "spack", "json"}));
  add_json_flag(*cmd, ctx);
  cmd->callback([o, cmd, &ctx] {
    o->lists.clear();
    for (auto& word : cmd->remaining())
      if (word != "--") o->lists.push_back(std::move(word));
    run_arch(*o, ctx);
  });
}

}  // namespace archbuild::cli
