// The Python side of the doctor: the script an interpreter runs, and reading what it printed.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "doctor/doctor.hpp"

namespace archbuild::doctor {

// Stage 1 reads torch/version.py as a file (no `import torch`: that may need a driver, take
// seconds or crash); stage 2 imports torch for what only the module knows. Each stage prints
// its own line so a crash in the import still leaves stage 1. get_arch_list() is empty where
// CUDA cannot initialise; the compiled-in flags are then read from torch._C directly. With
// the argument --no-import it stops after stage 1 (`archbuild env` must not import torch).
const char* const kTorchProbeScript = R"PY(
import json, os, sys
M = "@@archbuild-doctor@@"
def emit(d):
    sys.stdout.write("\n" + M + json.dumps(d) + "\n")
    sys.stdout.flush()
def why(e):
    return "%s: %s" % (type(e).__name__, e)
r = {"python": sys.executable, "python_version": "%d.%d.%d" % tuple(sys.version_info[:3])}
s = None
try:
    import importlib.util as u
    s = u.find_spec("torch")
except Exception as e:
    r["find_error"] = why(e)
if s is None or not s.submodule_search_locations:
    r["found"] = False
    emit(r)
    sys.exit(0)
d = list(s.submodule_search_locations)[0]
r["found"] = True
r["dir"] = os.path.abspath(d)
try:
    vs = u.spec_from_file_location("_archbuild_torch_version", os.path.join(d, "version.py"))
    vm = u.module_from_spec(vs)
    vs.loader.exec_module(vm)
    r["version"] = str(vm.__version__)
    r["cuda"] = getattr(vm, "cuda", None)
    r["hip"] = getattr(vm, "hip", None)
    r["version_read"] = True
except Exception as e:
    r["version_error"] = why(e)
emit(r)
if "--no-import" in sys.argv[1:]:
    sys.exit(0)
r = {"imported": True}
try:
    import torch
except BaseException as e:
    emit({"imported": False, "import_error": why(e)})
    sys.exit(0)
try:
    r["version"] = str(torch.__version__)
    r["cuda"] = torch.version.cuda
    r["hip"] = getattr(torch.version, "hip", None)
    r["version_read"] = True
except Exception as e:
    r["version_error"] = why(e)
try:
    r["cuda_available"] = bool(torch.cuda.is_available())
except Exception as e:
    r["cuda_available_error"] = why(e)
try:
    a = [str(x) for x in torch.cuda.get_arch_list()]
    if a:
        r["arch_list"] = a
        r["arch_list_source"] = "torch.cuda.get_arch_list()"
    else:
        f = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
        g = f() if f else None
        if g:
            r["arch_list"] = str(g).split()
            r["arch_list_source"] = "torch._C._cuda_getArchFlags()"
        else:
            r["arch_list_missing"] = "torch.cuda.get_arch_list() is empty (torch cannot use CUDA here)"
except Exception as e:
    r["arch_list_missing"] = "torch.cuda.get_arch_list() failed: " + why(e)
emit(r)
)PY";

namespace {

constexpr std::string_view kMarker = "@@archbuild-doctor@@";

std::optional<std::string> opt_string(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

bool probe_found_no_torch(const std::string& stdout_text) {
  for (const auto& raw : text::split_any(stdout_text, "\n")) {
    std::string line = text::trim(raw);
    if (!line.starts_with(kMarker)) continue;
    auto j = nlohmann::json::parse(line.substr(kMarker.size()), nullptr, false);
    if (j.is_object() && j.contains("found")) return j["found"] == false;
  }
  return false;
}

Result<TorchFacts> parse_torch_probe(const std::string& stdout_text, int status, const std::string& python) {
  nlohmann::json merged = nlohmann::json::object();
  int stages = 0;
  for (const auto& raw : text::split_any(stdout_text, "\n")) {
    std::string line = text::trim(raw);
    if (!line.starts_with(kMarker)) continue;
    auto j = nlohmann::json::parse(line.substr(kMarker.size()), nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    merged.update(j);  // later stages override (the imported module knows best)
    ++stages;
  }
  if (stages == 0)
    return Error::missing_tool(fmt::format("{}: the torch probe printed nothing (exit {}); is it a Python 3 interpreter?",
                                           python, status));
  if (!merged.value("found", false)) {
    std::string why = opt_string(merged, "find_error").value_or("");
    return Error::missing_tool(fmt::format("no torch is installed for {}{}", python, why.empty() ? "" : " (" + why + ")"));
  }
  TorchFacts t;
  t.python = opt_string(merged, "python").value_or(python);
  if (auto v = opt_string(merged, "python_version")) t.python_version = Version::parse(*v);
  t.dir = opt_string(merged, "dir").value_or("");
  t.version_read = merged.value("version_read", false);
  t.version = opt_string(merged, "version").value_or("");
  t.cuda = opt_string(merged, "cuda");
  t.hip = opt_string(merged, "hip");
  if (stages == 1)  // stage 2 never printed: the import killed the interpreter
    t.import_error = status == 0 ? std::string("`import torch` printed nothing")
                                 : fmt::format("the interpreter died while importing torch (exit {})", status);
  else if (auto e = opt_string(merged, "import_error"))
    t.import_error = *e;
  if (auto it = merged.find("cuda_available"); it != merged.end() && it->is_boolean()) t.cuda_available = it->get<bool>();
  if (auto it = merged.find("arch_list"); it != merged.end() && it->is_array()) {
    std::vector<std::string> list;
    for (const auto& e : *it)
      if (e.is_string()) list.push_back(e.get<std::string>());
    t.arch_list = list;
    t.arch_list_source = opt_string(merged, "arch_list_source").value_or("torch.cuda.get_arch_list()");
  } else if (t.import_error) {
    t.arch_list_missing = "torch cannot be imported: " + *t.import_error;
  } else {
    t.arch_list_missing = opt_string(merged, "arch_list_missing").value_or("torch reported no arch list");
  }
  return t;
}

}  // namespace archbuild::doctor
