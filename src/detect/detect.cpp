#include "detect/detect.hpp"

#include <charconv>
#include <dlfcn.h>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::detect {

namespace {

// A dlopen'ed library, closed on scope exit.
class Library {
 public:
  explicit Library(const std::string& name) : handle_(dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (!handle_) {
      const char* e = dlerror();
      error_ = e ? e : "cannot load";
    }
  }
  ~Library() {
    if (handle_) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  bool ok() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  template <class F>
  F get(const char* symbol) const {
    return reinterpret_cast<F>(dlsym(handle_, symbol));
  }

 private:
  void* handle_;
  std::string error_;
};

void annotate(DetectedGpu& g, const arch::ArchData& data) {
  g.known = data.identify(g.name);
  g.cc_known = data.find(g.cc) != nullptr;
}

// NVML's C ABI (stable since the v2 entry points); declared here so no NVML header is needed.
using nvmlDevice_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};

std::optional<std::string> try_nvml(const arch::ArchData& data, const std::string& lib_name, Detection& d) {
  Library lib(lib_name);
  if (!lib.ok()) return fmt::format("nvml: {}", lib.error());
  auto init = lib.get<int (*)()>("nvmlInit_v2");
  auto shutdown = lib.get<int (*)()>("nvmlShutdown");
  auto driver = lib.get<int (*)(char*, unsigned)>("nvmlSystemGetDriverVersion");
  auto cuda = lib.get<int (*)(int*)>("nvmlSystemGetCudaDriverVersion_v2");
  auto count = lib.get<int (*)(unsigned*)>("nvmlDeviceGetCount_v2");
  auto handle = lib.get<int (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2");
  auto name = lib.get<int (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetName");
  auto capability = lib.get<int (*)(nvmlDevice_t, int*, int*)>("nvmlDeviceGetCudaComputeCapability");
  auto memory = lib.get<int (*)(nvmlDevice_t, nvmlMemory_t*)>("nvmlDeviceGetMemoryInfo");
  if (!init || !shutdown || !count || !handle || !name || !capability)
    return std::string("nvml: library lacks the v2 entry points");
  if (int rc = init(); rc != 0) return fmt::format("nvml: nvmlInit_v2 failed (code {})", rc);
  char buf[256] = {};
  if (driver && driver(buf, sizeof buf) == 0) d.driver_version = buf;
  int cv = 0;
  if (cuda && cuda(&cv) == 0 && cv > 0) d.cuda_version = cuda_version_string(cv);
  unsigned n = 0;
  count(&n);
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    if (handle(i, &dev) != 0) continue;
    DetectedGpu g;
    g.index = static_cast<int>(i);
    char nm[256] = {};
    if (name(dev, nm, sizeof nm) == 0) g.name = nm;
    int major = 0, minor = 0;
    if (capability(dev, &major, &minor) != 0) continue;
    g.cc = {major, minor};
    nvmlMemory_t mem{};
    if (memory && memory(dev, &mem) == 0) g.memory_bytes = mem.total;
    annotate(g, data);
    d.gpus.push_back(std::move(g));
  }
  shutdown();
  if (d.gpus.empty()) return std::string("nvml: the driver reports no GPU");
  d.source = "nvml";
  return std::nullopt;
}

std::optional<std::string> try_cuda(const arch::ArchData& data, const std::string& lib_name, Detection& d) {
  Library lib(lib_name);
  if (!lib.ok()) return fmt::format("cuda: {}", lib.error());
  auto init = lib.get<int (*)(unsigned)>("cuInit");
  auto version = lib.get<int (*)(int*)>("cuDriverGetVersion");
  auto count = lib.get<int (*)(int*)>("cuDeviceGetCount");
  auto get = lib.get<int (*)(int*, int)>("cuDeviceGet");
  auto name = lib.get<int (*)(char*, int, int)>("cuDeviceGetName");
  auto attr = lib.get<int (*)(int*, int, int)>("cuDeviceGetAttribute");
  auto mem = lib.get<int (*)(std::size_t*, int)>("cuDeviceTotalMem_v2");
  if (!init || !count || !get || !name || !attr) return std::string("cuda: libcuda lacks the driver API");
  if (int rc = init(0); rc != 0) return fmt::format("cuda: cuInit failed (CUresult {})", rc);
  int v = 0;
  if (version && version(&v) == 0) d.cuda_version = cuda_version_string(v);
  int n = 0;
  count(&n);
  constexpr int kMajor = 75, kMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{MAJOR,MINOR}
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) continue;
    DetectedGpu g;
    g.index = i;
    char nm[256] = {};
    if (name(nm, sizeof nm, dev) == 0) g.name = nm;
    int major = 0, minor = 0;
    if (attr(&major, kMajor, dev) != 0 || attr(&minor, kMinor, dev) != 0) continue;
    g.cc = {major, minor};
    std::size_t bytes = 0;
    if (mem && mem(&bytes, dev) == 0) g.memory_bytes = bytes;
    annotate(g, data);
    d.gpus.push_back(std::move(g));
  }
  if (d.gpus.empty()) return std::string("cuda: the driver reports no GPU");
  d.source = "cuda";
  return std::nullopt;
}

std::optional<std::string> try_smi(const arch::ArchData& data, const SmiRunner& smi, Detection& d) {
  if (!smi) return std::string("nvidia-smi: not tried");
  auto r = smi({"nvidia-smi", "--query-gpu=index,name,compute_cap,memory.total,driver_version",
                "--format=csv,noheader,nounits"});
  if (!r) return fmt::format("nvidia-smi: {}", r.error().message);
  if (r->first != 0)
    return fmt::format("nvidia-smi: exit status {}: {}", r->first, text::trim(r->second).substr(0, 200));
  std::string driver;
  auto gpus = parse_smi_csv(r->second, &driver);
  if (!gpus) return fmt::format("nvidia-smi: {}", gpus.error().message);
  if (gpus->empty()) return std::string("nvidia-smi: lists no GPU");
  for (auto& g : *gpus) annotate(g, data);
  d.gpus = std::move(*gpus);
  d.driver_version = driver;
  d.source = "nvidia-smi";
  return std::nullopt;
}

}  // namespace

std::string cuda_version_string(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

Result<std::vector<DetectedGpu>> parse_smi_csv(const std::string& text_in, std::string* driver_version) {
  std::vector<DetectedGpu> out;
  for (const auto& raw : text::split_any(text_in, "\n")) {
    std::string line = text::trim(raw);
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::size_t start = 0;
    while (true) {
      auto comma = line.find(',', start);
      f.push_back(text::trim(line.substr(start, comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (f.size() < 3)
      return Error::bad_input(fmt::format("unexpected nvidia-smi line '{}'", line));
    DetectedGpu g;
    std::from_chars(f[0].data(), f[0].data() + f[0].size(), g.index);
    g.name = f[1];
    auto dot = f[2].find('.');
    int major = 0, minor = 0;
    if (dot == std::string::npos ||
        std::from_chars(f[2].data(), f[2].data() + dot, major).ec != std::errc() ||
        std::from_chars(f[2].data() + dot + 1, f[2].data() + f[2].size(), minor).ec != std::errc())
      return Error::bad_input(fmt::format(
          "nvidia-smi gave compute capability '{}' for {} (a driver older than 510 cannot report it)",
          f[2], g.name));
    g.cc = {major, minor};
    if (f.size() > 3) {
      std::uint64_t mib = 0;
      if (std::from_chars(f[3].data(), f[3].data() + f[3].size(), mib).ec == std::errc())
        g.memory_bytes = mib * 1024 * 1024;
    }
    if (f.size() > 4 && driver_version) *driver_version = f[4];
    out.push_back(std::move(g));
  }
  return out;
}

Detection detect(const arch::ArchData& data, const DetectOptions& options) {
  Detection d;
  auto want = [&](const char* s) { return options.only.empty() || options.only == s; };
  if (want("nvml")) {
    Detection attempt;
    if (auto why = try_nvml(data, options.nvml_library, attempt)) d.tried.push_back(*why);
    else return attempt;
  }
  if (want("cuda")) {
    Detection attempt;
    if (auto why = try_cuda(data, options.cuda_library, attempt)) d.tried.push_back(*why);
    else {
      attempt.tried = d.tried;
      return attempt;
    }
  }
  if (want("nvidia-smi")) {
    Detection attempt;
    if (auto why = try_smi(data, options.smi, attempt)) d.tried.push_back(*why);
    else {
      attempt.tried = d.tried;
      return attempt;
    }
  }
  return d;
}

}  // namespace archbuild::detect
