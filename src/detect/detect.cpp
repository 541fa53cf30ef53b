#include "detect/detect.hpp"

#include <algorithm>
#include <charconv>
#include <dlfcn.h>

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/text.hpp"

namespace archbuild::detect {

namespace {

// A dlopen'ed library, closed on scope exit. A name with a '/' is a path from the environment
// (ARCHBUILD_NVML_LIBRARY, ARCHBUILD_CUDA_LIBRARY): it is checked as an input path is before
// dlopen reads it (a FIFO's open() waits for a writer forever); a bare soname is the loader's.
class Library {
 public:
  explicit Library(const std::string& name) {
    if (name.find('/') != std::string::npos) {
      if (auto regular = paths::expect_regular_file(name, "library"); !regular) {
        error_ = regular.error().message;
        return;
      }
    }
    handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
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
  void* handle_ = nullptr;
  std::string error_;
};

void annotate(DetectedGpu& g, const arch::ArchData& data) {
  g.known = data.identify(g.name);
  g.cc_known = data.find(g.cc) != nullptr;
}

// NVML's C ABI (stable since the v2 entry points); declared here so no NVML header is needed.
// Every declaration, constant and buffer size below was checked against
// NVIDIA/go-nvml@2f9e261fe40a7a1c54783d66805e8920564763b4:pkg/nvml/nvml.h (NVML API version 13):
// nvmlReturn_t is an enum (NVML_SUCCESS = 0), read here as int; nvmlDevice_t is a pointer to an
// opaque struct; nvmlMemory_t is the v1 struct that nvmlDeviceGetMemoryInfo fills (the _v2 struct
// starts with a version field and goes to nvmlDeviceGetMemoryInfo_v2, which we do not call).
using nvmlDevice_t = void*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
constexpr unsigned kNvmlDriverVersionBuffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned kNvmlNameBuffer = 96;           // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kNvmlUuidBuffer = 96;           // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kNvmlMigEnable = 1;             // NVML_DEVICE_MIG_ENABLE

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
  auto uuid = lib.get<int (*)(nvmlDevice_t, char*, unsigned)>("nvmlDeviceGetUUID");
  // MIG (NVML 11+; absent or NVML_ERROR_NOT_SUPPORTED on GPUs without MIG).
  auto mig_mode = lib.get<int (*)(nvmlDevice_t, unsigned*, unsigned*)>("nvmlDeviceGetMigMode");
  auto mig_max = lib.get<int (*)(nvmlDevice_t, unsigned*)>("nvmlDeviceGetMaxMigDeviceCount");
  auto mig_handle = lib.get<int (*)(nvmlDevice_t, unsigned, nvmlDevice_t*)>("nvmlDeviceGetMigDeviceHandleByIndex");
  if (!init || !shutdown || !count || !handle || !name || !capability)
    return std::string("nvml: library lacks the v2 entry points");
  if (int rc = init(); rc != 0) return fmt::format("nvml: nvmlInit_v2 failed (code {})", rc);
  char buf[kNvmlDriverVersionBuffer] = {};
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
    char nm[kNvmlNameBuffer] = {};
    if (name(dev, nm, sizeof nm) == 0) g.name = nm;
    int major = 0, minor = 0;
    if (capability(dev, &major, &minor) != 0) continue;
    g.cc = {major, minor};
    nvmlMemory_t mem{};
    if (memory && memory(dev, &mem) == 0) g.memory_bytes = mem.total;
    char id[kNvmlUuidBuffer] = {};
    if (uuid && uuid(dev, id, sizeof id) == 0) g.uuid = id;
    unsigned current = 0, pending = 0;
    if (mig_mode && mig_mode(dev, &current, &pending) == 0 && current == kNvmlMigEnable) {
      g.mig = true;
      unsigned max = 0;
      if (mig_max && mig_handle && uuid && mig_max(dev, &max) == 0)
        for (unsigned m = 0; m < max; ++m) {
          nvmlDevice_t md = nullptr;
          if (mig_handle(dev, m, &md) != 0) continue;  // NVML_ERROR_NOT_FOUND: no device in that slot
          MigDevice x;
          char mid[kNvmlUuidBuffer] = {};
          if (uuid(md, mid, sizeof mid) == 0) x.uuid = mid;
          nvmlMemory_t mm{};
          if (memory && memory(md, &mm) == 0) x.memory_bytes = mm.total;
          g.mig_devices.push_back(std::move(x));
        }
      // CUDA gets a MIG device, not the whole GPU's memory.
      g.memory_bytes = g.mig_devices.empty() ? std::nullopt : g.mig_devices.front().memory_bytes;
    }
    annotate(g, data);
    d.gpus.push_back(std::move(g));
  }
  shutdown();
  if (d.gpus.empty()) return std::string("nvml: the driver reports no GPU");
  d.source = "nvml";
  return std::nullopt;
}

std::vector<std::string> mask_entries(const std::string& mask) {
  std::vector<std::string> out;
  for (const auto& e : text::split_any(mask, ",")) out.push_back(text::trim(e));
  return out;
}

std::optional<std::string> try_cuda(const arch::ArchData& data, const std::string& lib_name,
                                    const std::optional<std::string>& mask, Detection& d) {
  Library lib(lib_name);
  if (!lib.ok()) return fmt::format("cuda: {}", lib.error());
  auto init = lib.get<int (*)(unsigned)>("cuInit");
  auto version = lib.get<int (*)(int*)>("cuDriverGetVersion");
  auto count = lib.get<int (*)(int*)>("cuDeviceGetCount");
  auto get = lib.get<int (*)(int*, int)>("cuDeviceGet");
  auto name = lib.get<int (*)(char*, int, int)>("cuDeviceGetName");
  auto attr = lib.get<int (*)(int*, int, int)>("cuDeviceGetAttribute");
  auto mem = lib.get<int (*)(std::size_t*, int)>("cuDeviceTotalMem_v2");
  auto uuid = lib.get<int (*)(unsigned char*, int)>("cuDeviceGetUuid_v2");
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
    // CU_DEVICE_ATTRIBUTE_INTEGRATED (18, cuda.h): the GPU shares the host's memory (Jetson).
    constexpr int kIntegrated = 18;
    int integrated = 0;
    if (attr(&integrated, kIntegrated, dev) == 0) g.integrated = integrated != 0;
    std::size_t bytes = 0;
    if (mem && mem(&bytes, dev) == 0) g.memory_bytes = bytes;
    unsigned char id[16] = {};
    if (uuid && uuid(id, dev) == 0) g.uuid = uuid_string(id);
    // The ordinal is CUDA's under the job's own mask and order (which the child inherits): the
    // mask's entry for it, or the ordinal itself — never re-read in PCI order.
    auto entries = mask ? mask_entries(*mask) : std::vector<std::string>{};
    g.cuda_select = mask && static_cast<std::size_t>(i) < entries.size() ? entries[static_cast<std::size_t>(i)]
                                                                          : std::to_string(i);
    annotate(g, data);
    d.gpus.push_back(std::move(g));
  }
  if (d.gpus.empty()) return std::string("cuda: the driver reports no GPU");
  d.source = "cuda";
  return std::nullopt;
}

std::optional<std::string> try_smi(const arch::ArchData& data, const SmiRunner& smi, Detection& d) {
  if (!smi) return std::string("nvidia-smi: not tried");
  auto r = smi({"nvidia-smi", "--query-gpu=index,name,compute_cap,memory.total,driver_version,uuid",
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

std::string uuid_string(const unsigned char* b) {
  std::string hex;
  for (int i = 0; i < 16; ++i) hex += fmt::format("{:02x}", b[i]);
  return fmt::format("GPU-{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4), hex.substr(16, 4),
                     hex.substr(20));
}

namespace {

// How a child selects `g` when the mask does not say: a MIG device's UUID (CUDA uses MIG devices,
// not the GPU), else the GPU's UUID, else its PCI-order index.
void select_default(DetectedGpu& g) {
  g.pci_order = false;
  if (g.mig) {
    g.cuda_select = g.mig_devices.empty() ? "" : g.mig_devices.front().uuid;
  } else if (!g.uuid.empty()) {
    g.cuda_select = g.uuid;
  } else {
    g.cuda_select = std::to_string(g.index);
    g.pci_order = true;
  }
}

std::string gpu_words(const DetectedGpu& g) {
  return fmt::format("GPU {} ({}{})", g.index, g.name, g.uuid.empty() ? "" : ", " + g.uuid);
}

}  // namespace

void apply_visible_devices(Detection& d, const std::optional<std::string>& mask, const std::string& order,
                           const std::optional<std::vector<std::string>>& cuda_uuids) {
  for (auto& g : d.gpus) select_default(g);
  if (!mask) return;
  std::vector<DetectedGpu> kept;
  std::vector<bool> taken(d.gpus.size(), false);
  bool assumed_pci = false;
  auto by = [&](auto pred) -> std::optional<std::size_t> {
    for (std::size_t i = 0; i < d.gpus.size(); ++i)
      if (pred(d.gpus[i])) return i;
    return std::nullopt;
  };
  auto starts = [](const std::string& s, const std::string& prefix) { return !prefix.empty() && s.rfind(prefix, 0) == 0; };
  for (const auto& e : mask_entries(*mask)) {
    std::optional<std::size_t> hit;
    std::string mig_uuid;
    int n = -1;
    bool integer = !e.empty() && std::from_chars(e.data(), e.data() + e.size(), n).ptr == e.data() + e.size();
    if (e.rfind("MIG-", 0) == 0) {
      hit = by([&](const DetectedGpu& g) {
        for (const auto& m : g.mig_devices)
          if (starts(m.uuid, e)) return mig_uuid = m.uuid, true;
        return false;
      });
    } else if (e.rfind("GPU-", 0) == 0) {
      hit = by([&](const DetectedGpu& g) { return starts(g.uuid, e); });
    } else if (integer && n >= 0) {
      if (order == "PCI_BUS_ID" || d.gpus.size() == 1) {
        hit = by([&](const DetectedGpu& g) { return g.index == n; });
      } else if (cuda_uuids) {
        if (static_cast<std::size_t>(n) < cuda_uuids->size())
          hit = by([&](const DetectedGpu& g) { return g.uuid == (*cuda_uuids)[static_cast<std::size_t>(n)]; });
      } else {
        hit = by([&](const DetectedGpu& g) { return g.index == n; });
        assumed_pci = true;
      }
    }
    if (!hit) {
      // CUDA ignores the entry and every one after it.
      d.notes.push_back(fmt::format("CUDA_VISIBLE_DEVICES={}: '{}' names no GPU here, so CUDA uses none from it on",
                                    text::quoted(*mask), e));
      break;
    }
    if (taken[*hit]) continue;
    taken[*hit] = true;
    DetectedGpu g = d.gpus[*hit];
    if (!mig_uuid.empty()) g.cuda_select = mig_uuid;
    kept.push_back(std::move(g));
  }
  for (std::size_t i = 0; i < d.gpus.size(); ++i)
    if (!taken[i])
      d.hidden.push_back(fmt::format("{}: not in the job's CUDA_VISIBLE_DEVICES={}", gpu_words(d.gpus[i]),
                                     text::quoted(*mask)));
  if (assumed_pci)
    d.notes.push_back(fmt::format(
        "CUDA_VISIBLE_DEVICES={} names GPUs by their index in CUDA's default order (fastest first), which NVML "
        "does not know and the CUDA driver did not tell: PCI bus order assumed (set CUDA_DEVICE_ORDER=PCI_BUS_ID, or "
        "name GPUs by UUID)",
        text::quoted(*mask)));
  d.gpus = std::move(kept);
}

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
    if (f.size() > 5 && f[5].rfind("GPU-", 0) == 0) g.uuid = f[5];
    out.push_back(std::move(g));
  }
  return out;
}

Detection detect(const arch::ArchData& data, const DetectOptions& options) {
  Detection d;
  auto want = [&](const char* s) { return options.only.empty() || options.only == s; };
  // NVML and nvidia-smi list every GPU: keep those the job's mask leaves to CUDA. Integers in a
  // mask in CUDA's default order need libcuda's own list (it applies the mask) when there are several.
  auto masked = [&](Detection& attempt) {
    std::optional<std::vector<std::string>> cuda_uuids;
    const auto& mask = options.visible_devices;
    if (mask && options.device_order != "PCI_BUS_ID" && attempt.gpus.size() > 1) {
      Detection cuda;
      if (!try_cuda(data, options.cuda_library, mask, cuda)) {
        cuda_uuids.emplace();
        for (const auto& g : cuda.gpus)
          if (!g.uuid.empty()) cuda_uuids->push_back(g.uuid);
        if (cuda_uuids->size() != cuda.gpus.size()) cuda_uuids.reset();
      }
    }
    std::size_t all = attempt.gpus.size();
    apply_visible_devices(attempt, mask, options.device_order, cuda_uuids);
    if (attempt.gpus.empty() && mask)
      attempt.tried.push_back(fmt::format("{}: CUDA_VISIBLE_DEVICES={} leaves none of the {} GPU{} here to CUDA",
                                          attempt.source, text::quoted(*mask), all, all == 1 ? "" : "s"));
    return attempt;
  };
  if (want("nvml")) {
    Detection attempt;
    if (auto why = try_nvml(data, options.nvml_library, attempt)) d.tried.push_back(*why);
    else return masked(attempt);
  }
  if (want("cuda")) {
    Detection attempt;
    if (auto why = try_cuda(data, options.cuda_library, options.visible_devices, attempt)) d.tried.push_back(*why);
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
      return masked(attempt);
    }
  }
  return d;
}

}  // namespace archbuild::detect
