#include "run/admission.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>

namespace archbuild::run {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSlotPrefix = "slot-";
// A compile waiting for its share. Named by the time it started waiting, so that names sort
// oldest first: the oldest waiter's share is reserved ahead of younger requests, or a stream
// of small compiles would keep a large one (a flash-attention kernel) out for good.
constexpr std::string_view kWaitPrefix = "wait-";

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The live shares in `dir` named PREFIX…, only those whose name sorts before `before` when it
// is given: their sum, or with `oldest_only` the share of the first by name. Removes the files
// whose holder is gone (its lock dropped). Called with admission.lock held, so no file is
// being created meanwhile.
std::uint64_t live_shares(const fs::path& dir, std::string_view prefix, const std::string& before = {},
                          bool oldest_only = false) {
  std::uint64_t total = 0;
  std::string oldest;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string name = de.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    if (!before.empty() && name >= before) continue;
    Fd f{::open(de.path().c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) continue;
    if (::flock(f.fd, LOCK_SH | LOCK_NB) == 0) {
      // Nobody holds it: a compile that died (killed, OOM) without releasing its share.
      std::error_code rm;
      fs::remove(de.path(), rm);
      continue;
    }
    char buf[32] = {};
    ssize_t n = ::pread(f.fd, buf, sizeof buf - 1, 0);
    std::uint64_t share = n > 0 ? std::strtoull(buf, nullptr, 10) : 0;
    if (!oldest_only) {
      total += share;
    } else if (oldest.empty() || name < oldest) {
      oldest = name;
      total = share;
    }
  }
  return total;
}

}  // namespace

Admission::Admission(Admission&& other) noexcept
    : fd_(other.fd_), slot_(std::move(other.slot_)), waited_(other.waited_), share_mb_(other.share_mb_) {
  other.fd_ = -1;
}

Admission& Admission::operator=(Admission&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    slot_ = std::move(other.slot_);
    waited_ = other.waited_;
    share_mb_ = other.share_mb_;
    other.fd_ = -1;
  }
  return *this;
}

Admission::~Admission() { release(); }

void Admission::release() {
  if (fd_ < 0) return;
  // Remove first, then unlock: a reader never sees a live-looking file with no holder.
  std::error_code ec;
  fs::remove(slot_, ec);
  ::close(fd_);
  fd_ = -1;
}

Result<Admission> admit(const AdmissionRequest& request) {
  std::error_code ec;
  fs::create_directories(request.dir, ec);
  if (ec)
    return Error::bad_input(
        fmt::format("{}: cannot create the admission directory: {}", request.dir.string(), ec.message()));
  const fs::path lock_path = request.dir / "admission.lock";
  static std::atomic<unsigned> counter{0};
  const auto start = std::chrono::steady_clock::now();
  // CLOCK_MONOTONIC is one clock for every process of the host: names sort by waiting age.
  const auto since_boot = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  const std::string suffix = fmt::format("{:020}-{}-{}", since_boot, ::getpid(), counter++);
  const std::string wait_name = std::string(kWaitPrefix) + suffix;
  Admission a;  // holds the wait file, then (renamed) the slot: removed however this returns
  a.share_mb_ = request.need_mb;
  for (;;) {
    Fd lock{::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)};
    if (lock.fd < 0 || ::flock(lock.fd, LOCK_EX) != 0)
      return Error::bad_input(fmt::format("{}: cannot lock: {}", lock_path.string(), std::strerror(errno)));
    if (a.fd_ < 0) {
      a.slot_ = request.dir / wait_name;
      a.fd_ = ::open(a.slot_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
      if (a.fd_ < 0 || ::flock(a.fd_, LOCK_EX | LOCK_NB) != 0)
        return Error::bad_input(fmt::format("{}: cannot create: {}", a.slot_.string(), std::strerror(errno)));
      std::string share = std::to_string(request.need_mb);
      if (::write(a.fd_, share.data(), share.size()) != static_cast<ssize_t>(share.size()))
        return Error::bad_input(fmt::format("{}: cannot write: {}", a.slot_.string(), std::strerror(errno)));
    }
    const std::uint64_t taken = live_shares(request.dir, kSlotPrefix);
    // Only the oldest waiter is reserved for: younger requests still fill the rest (reserving
    // for every older one made admission first-come-first-served and left memory idle).
    const std::uint64_t older = live_shares(request.dir, kWaitPrefix, wait_name, true);
    if ((taken == 0 && older == 0) || taken + older + request.need_mb <= request.budget_mb) {
      // The lock lives on the file, not the name: renaming keeps it held.
      fs::path slot = request.dir / (std::string(kSlotPrefix) + suffix);
      fs::rename(a.slot_, slot, ec);
      if (ec) return Error::bad_input(fmt::format("{}: cannot rename: {}", a.slot_.string(), ec.message()));
      a.slot_ = slot;
      a.waited_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      return a;
    }
    ::close(lock.fd);
    lock.fd = -1;
    std::this_thread::sleep_for(request.poll);
  }
}

std::uint64_t admitted_mb(const fs::path& dir) {
  Fd lock{::open((dir / "admission.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)};
  if (lock.fd >= 0) ::flock(lock.fd, LOCK_EX);
  return live_shares(dir, kSlotPrefix);
}

void append_record(const fs::path& file, const CompileRecord& r) {
  std::string source = r.source;
  for (char& c : source)
    if (c == '\t' || c == '\n') c = ' ';
  auto clean = [](std::string v) {
    for (char& c : v)
      if (c == '\t' || c == '\n') c = ' ';
    return v;
  };
  std::string line = fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", source, r.peak_kb, r.waited_ms, r.exit_code,
                                 clean(r.output), r.expect_mb, clean(r.basis), clean(r.lang));
  Fd f{::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)};
  if (f.fd >= 0) (void)!::write(f.fd, line.data(), line.size());
}

std::vector<CompileRecord> read_records(const fs::path& file) {
  std::vector<CompileRecord> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::size_t at = 0;
    for (;;) {
      auto tab = line.find('\t', at);
      f.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    if (f.size() != 4 && f.size() != 8) continue;
    CompileRecord r;
    r.source = f[0];
    try {
      r.peak_kb = std::stoull(f[1]);
      r.waited_ms = std::stoull(f[2]);
      r.exit_code = std::stoi(f[3]);
      if (f.size() == 8) {
        r.output = f[4];
        r.expect_mb = std::stoull(f[5]);
        r.basis = f[6];
        r.lang = f[7];
      }
    } catch (const std::exception&) {
      continue;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::uint64_t> measured_peak_mb(const fs::path& file, const std::string& source) {
  std::optional<std::uint64_t> kb;
  for (const auto& r : read_records(file))
    if (r.source == source && r.exit_code == 0) kb = r.peak_kb;
  if (!kb) return std::nullopt;
  return (*kb + 1023) / 1024;
}

nlohmann::json AdmissionConfig::to_json() const {
  nlohmann::json patterns = nlohmann::json::array();
  for (const auto& p : figures.patterns) patterns.push_back({{"glob", p.glob}, {"mb", p.mb}});
  return {{"budget_mb", budget_mb},
          {"c_mb", figures.c_mb},
          {"cxx_mb", figures.cxx_mb},
          {"cuda_mb", figures.cuda_mb},
          {"cuda_thread_mb", figures.cuda_thread_mb},
          {"patterns", patterns},
          {"peaks", peaks.string()},
          {"records", records.string()}};
}

fs::path config_path(const fs::path& admission_dir) { return admission_dir / "config.json"; }

Result<Ok> write_config(const fs::path& dir, const AdmissionConfig& config) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path tmp = dir / fmt::format(".config.json.{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << config.to_json().dump(2) << "\n";
    if (!out) return Error::bad_input(fmt::format("{}: cannot write", tmp.string()));
  }
  fs::rename(tmp, config_path(dir), ec);
  if (ec) return Error::bad_input(fmt::format("{}: cannot write: {}", config_path(dir).string(), ec.message()));
  return Ok{};
}

Result<AdmissionConfig> read_config(const fs::path& dir) {
  fs::path file = config_path(dir);
  std::ifstream in(file);
  if (!in) return Error::bad_input(fmt::format("{}: cannot read the build's admission settings", file.string()));
  try {
    auto j = nlohmann::json::parse(in);
    AdmissionConfig c;
    c.budget_mb = j.at("budget_mb").get<std::uint64_t>();
    c.figures.c_mb = j.at("c_mb").get<std::uint64_t>();
    c.figures.cxx_mb = j.at("cxx_mb").get<std::uint64_t>();
    c.figures.cuda_mb = j.at("cuda_mb").get<std::uint64_t>();
    c.figures.cuda_thread_mb = j.at("cuda_thread_mb").get<std::uint64_t>();
    for (const auto& p : j.at("patterns"))
      c.figures.patterns.push_back({p.at("glob").get<std::string>(), p.at("mb").get<std::uint64_t>()});
    c.peaks = j.at("peaks").get<std::string>();
    c.records = j.at("records").get<std::string>();
    return c;
  } catch (const std::exception& e) {
    return Error::bad_input(fmt::format("{}: not the build's admission settings: {}", file.string(), e.what()));
  }
}

unsigned nvcc_threads(const std::vector<std::string>& argv, const std::string& nvcc_flags_env, unsigned cpus) {
  std::vector<std::string> args(argv.begin(), argv.end());
  std::istringstream extra(nvcc_flags_env);
  for (std::string w; extra >> w;) args.push_back(w);
  std::optional<long> n;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string value;
    if ((a == "--threads" || a == "-t") && i + 1 < args.size()) value = args[i + 1];
    else if (a.starts_with("--threads=")) value = a.substr(10);
    else continue;
    char* end = nullptr;
    long v = std::strtol(value.c_str(), &end, 10);
    if (end && *end == '\0' && v >= 0) n = v;  // the last one wins, as in nvcc
  }
  if (!n) return 1;
  if (*n == 0) return std::max(1u, cpus);
  return static_cast<unsigned>(std::min<long>(*n, 1024));
}

Expected expected_peak(const recipe::CompileMemory& figures, const std::string& lang, const std::string& source,
                       unsigned threads, std::optional<std::uint64_t> measured) {
  if (measured) return {*measured, "measured"};
  for (const auto& p : figures.patterns)
    if (!source.empty() && ::fnmatch(p.glob.c_str(), source.c_str(), 0) == 0) return {p.mb, "pattern " + p.glob};
  if (lang == "C") return {figures.c_mb, "C"};
  if (lang == "CXX") return {figures.cxx_mb, "C++"};
  threads = std::max(1u, threads);
  return {figures.cuda_mb + figures.cuda_thread_mb * (threads - 1),
          threads == 1 ? std::string("CUDA") : fmt::format("CUDA x{} threads", threads)};
}

void merge_peaks(const fs::path& peaks, const std::vector<CompileRecord>& records) {
  std::map<std::string, CompileRecord> by_source;
  for (auto& r : read_records(peaks)) by_source[r.source] = r;
  bool changed = false;
  for (const auto& r : records)
    if (r.exit_code == 0 && !r.source.empty() && r.peak_kb > 0) {
      by_source[r.source] = r;
      changed = true;
    }
  if (!changed) return;
  std::error_code ec;
  fs::create_directories(peaks.parent_path(), ec);
  fs::path tmp = peaks;
  tmp += fmt::format(".{}.tmp", ::getpid());
  fs::remove(tmp, ec);
  for (const auto& [source, r] : by_source) append_record(tmp, r);
  fs::rename(tmp, peaks, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace archbuild::run
