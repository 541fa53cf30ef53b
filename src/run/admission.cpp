#include "run/admission.hpp"

#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <functional>
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
// A compile waiting for its share ("MB MS": expected peak and duration). Named by the time it
// started waiting, so that names sort oldest first (the tie-break of `choose`).
constexpr std::string_view kWaitPrefix = "wait-";

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// One live share file: its name (sorts by age), its expected peak and duration.
struct Share {
  std::string name;
  std::uint64_t mb = 0;
  std::uint64_t ms = 0;  // expected duration; 0: unknown
};

// The live share files in `dir` named PREFIX…. Removes the files whose holder is gone (its lock
// dropped). Called with admission.lock held, so no file is being created meanwhile.
std::vector<Share> live_shares(const fs::path& dir, std::string_view prefix) {
  std::vector<Share> out;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    std::string name = de.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    Fd f{::open(de.path().c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0) continue;
    if (::flock(f.fd, LOCK_SH | LOCK_NB) == 0) {
      // Nobody holds it: a compile that died (killed, OOM) without releasing its share.
      std::error_code rm;
      fs::remove(de.path(), rm);
      continue;
    }
    char buf[64] = {};
    ssize_t n = ::pread(f.fd, buf, sizeof buf - 1, 0);
    Share s{std::move(name)};
    if (n > 0) {
      char* end = nullptr;
      s.mb = std::strtoull(buf, &end, 10);
      s.ms = std::strtoull(end, nullptr, 10);  // absent (older form): 0
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::uint64_t sum_mb(const std::vector<Share>& shares) {
  std::uint64_t total = 0;
  for (const auto& s : shares) total += s.mb;
  return total;
}

// LPT-style packing over the waiters: the largest work first (expected peak x expected
// duration, a compile of unknown duration counted as 1 s), ties oldest first; each that fits
// what is left is chosen. The first in that order that does not fit keeps its share reserved
// (smaller ones fill the rest), so a stream of small compiles cannot keep a large one out for
// good. A share larger than the budget is chosen only when nothing is admitted: it runs alone.
// Every waiter computes the same choice from the same files; the chosen stay chosen as they
// move into slots (what each one left is at least the shares chosen after it): only a larger
// compile arriving meanwhile goes ahead of them.
std::vector<std::string> choose(std::vector<Share> waiters, std::uint64_t taken, std::uint64_t budget) {
  auto work = [](const Share& s) { return s.mb * (s.ms ? s.ms : 1000); };
  std::sort(waiters.begin(), waiters.end(), [&](const Share& a, const Share& b) {
    if (work(a) != work(b)) return work(a) > work(b);
    return a.name < b.name;
  });
  std::vector<std::string> chosen;
  std::int64_t left = static_cast<std::int64_t>(budget) - static_cast<std::int64_t>(taken);
  bool reserved = false;
  for (const auto& w : waiters) {
    const auto need = static_cast<std::int64_t>(w.mb);
    if (need <= left || (taken == 0 && chosen.empty() && !reserved)) {
      chosen.push_back(w.name);
      left -= need;
    } else if (!reserved) {
      reserved = true;
      left -= need;
    }
    if (left <= 0) break;
  }
  return chosen;
}

// Sleeps until a share may have come free in `dir` (a slot or wait file removed, or closed by a
// holder that died: the kernel closes its files, IN_CLOSE_WRITE) or `poll` passed. `ino` is an
// inotify descriptor watching `dir` (-1: plain sleep). The lock file's closes are noise, skipped.
void wait_for_change(int ino, std::chrono::milliseconds poll) {
  if (ino < 0) {
    std::this_thread::sleep_for(poll);
    return;
  }
  const auto until = std::chrono::steady_clock::now() + poll;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{ino, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
    ssize_t n = ::read(ino, buf, sizeof buf);
    if (n <= 0) return;
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      std::string_view name = e->len ? std::string_view(e->name) : std::string_view();
      if (name.starts_with(kSlotPrefix) || name.starts_with(kWaitPrefix)) return;
    }
  }
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
  // Woken when a share is released rather than by polling alone: on a busy host, waiters
  // polling every few ms cost CPU and each admission up to a poll late. The poll stays as the
  // fallback (no inotify, an event missed).
  Fd ino{::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)};
  if (ino.fd >= 0 && ::inotify_add_watch(ino.fd, request.dir.c_str(), IN_DELETE | IN_CLOSE_WRITE) < 0) {
    ::close(ino.fd);
    ino.fd = -1;
  }
  for (;;) {
    Fd lock{::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)};
    if (lock.fd < 0 || ::flock(lock.fd, LOCK_EX) != 0)
      return Error::bad_input(fmt::format("{}: cannot lock: {}", lock_path.string(), std::strerror(errno)));
    if (a.fd_ < 0) {
      a.slot_ = request.dir / wait_name;
      a.fd_ = ::open(a.slot_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
      if (a.fd_ < 0 || ::flock(a.fd_, LOCK_EX | LOCK_NB) != 0)
        return Error::bad_input(fmt::format("{}: cannot create: {}", a.slot_.string(), std::strerror(errno)));
      std::string share = fmt::format("{} {}", request.need_mb, request.expect_ms);
      if (::write(a.fd_, share.data(), share.size()) != static_cast<ssize_t>(share.size()))
        return Error::bad_input(fmt::format("{}: cannot write: {}", a.slot_.string(), std::strerror(errno)));
    }
    const std::uint64_t taken = sum_mb(live_shares(request.dir, kSlotPrefix));
    const auto chosen = choose(live_shares(request.dir, kWaitPrefix), taken, request.budget_mb);
    if (std::find(chosen.begin(), chosen.end(), wait_name) != chosen.end()) {
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
    wait_for_change(ino.fd, request.poll);
  }
}

std::uint64_t admitted_mb(const fs::path& dir) {
  Fd lock{::open((dir / "admission.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)};
  if (lock.fd >= 0) ::flock(lock.fd, LOCK_EX);
  return sum_mb(live_shares(dir, kSlotPrefix));
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
  std::string line = fmt::format("{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n", source, r.peak_kb, r.waited_ms,
                                 r.exit_code, clean(r.output), r.expect_mb, clean(r.basis), clean(r.lang), r.wall_ms,
                                 std::max(1u, r.threads));
  Fd f{::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)};
  if (f.fd >= 0) (void)!::write(f.fd, line.data(), line.size());
}

namespace {

// One line of a records file (tab-separated: the 4-, 8- and 10-field forms), or nullopt.
std::optional<CompileRecord> parse_record(std::string_view line) {
  std::vector<std::string_view> f;
  for (std::size_t at = 0;;) {
    const auto tab = line.find('\t', at);
    f.push_back(line.substr(at, tab == std::string_view::npos ? std::string_view::npos : tab - at));
    if (tab == std::string_view::npos) break;
    at = tab + 1;
  }
  if (f.size() != 4 && f.size() != 8 && f.size() != 10) return std::nullopt;
  auto number = [](std::string_view v, auto& out) {
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && end == v.data() + v.size();
  };
  CompileRecord r;
  r.source = std::string(f[0]);
  if (!number(f[1], r.peak_kb) || !number(f[2], r.waited_ms) || !number(f[3], r.exit_code)) return std::nullopt;
  if (f.size() >= 8) {
    r.output = std::string(f[4]);
    if (!number(f[5], r.expect_mb)) return std::nullopt;
    r.basis = std::string(f[6]);
    r.lang = std::string(f[7]);
  }
  if (f.size() == 10) {
    unsigned threads = 1;
    if (!number(f[8], r.wall_ms) || !number(f[9], threads)) return std::nullopt;
    r.threads = std::max(1u, threads);
  }
  return r;
}

// Calls fn(block) with the file's lines, whole lines a block at a time (the last one too when
// the file does not end with a newline), through one 64 KiB buffer: every compile of a build
// reads the peaks file, and reading a large project's (1.5 MB) into one fresh string cost ~6 ms
// of first touches of its pages. Nothing when the file cannot be read.
template <class Fn>
void for_each_block(const fs::path& file, Fn fn) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return;
  std::vector<char> buf(64 << 10);
  std::size_t kept = 0;  // the start of a line not yet complete, moved to the front
  for (bool more = true; more;) {
    if (kept == buf.size()) buf.resize(buf.size() * 2);  // a line longer than the buffer
    in.read(buf.data() + kept, static_cast<std::streamsize>(buf.size() - kept));
    const std::size_t filled = kept + static_cast<std::size_t>(in.gcount());
    more = in.gcount() > 0;
    std::size_t done = filled;  // at the end of the file, everything
    if (more) {
      const std::string_view read(buf.data(), filled);
      const auto nl = read.rfind('\n');
      done = nl == std::string_view::npos ? 0 : nl + 1;
    }
    if (done > 0) fn(std::string_view(buf.data(), done));
    kept = filled - done;
    std::copy(buf.begin() + static_cast<std::ptrdiff_t>(done), buf.begin() + static_cast<std::ptrdiff_t>(filled),
              buf.begin());
  }
}

}  // namespace

std::vector<CompileRecord> read_records(const fs::path& file) {
  std::vector<CompileRecord> out;
  for_each_block(file, [&](std::string_view block) {
    while (!block.empty()) {
      const auto nl = block.find('\n');
      if (auto r = parse_record(block.substr(0, nl))) out.push_back(std::move(*r));
      if (nl == std::string_view::npos) break;
      block.remove_prefix(nl + 1);
    }
  });
  return out;
}

std::optional<Measurement> measured(const fs::path& file, const std::string& source) {
  // Only the lines that begin with the source are parsed: parsing all 10,000 records of a large
  // project took 26 ms of each compile.
  const std::string key = source + '\t';
  const std::boyer_moore_horspool_searcher search(key.begin(), key.end());
  std::optional<Measurement> m;
  for_each_block(file, [&](std::string_view block) {
    for (auto at = block.begin();;) {
      at = std::search(at, block.end(), search);
      if (at == block.end()) break;
      const auto line = at;
      at += static_cast<std::ptrdiff_t>(key.size());
      if (line != block.begin() && line[-1] != '\n') continue;  // the end of a longer path
      const auto line_end = std::find(line, block.end(), '\n');
      auto r = parse_record(block.substr(static_cast<std::size_t>(line - block.begin()),
                                         static_cast<std::size_t>(line_end - line)));
      if (r && r->source == source && r->exit_code == 0)
        m = Measurement{(r->peak_kb + 1023) / 1024, r->wall_ms, r->threads};
    }
  });
  return m;
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

std::uint64_t rescale_peak_mb(const recipe::CompileMemory& figures, std::uint64_t peak_mb, unsigned from, unsigned to) {
  from = std::max(1u, from);
  to = std::max(1u, to);
  if (from == to) return peak_mb;
  const std::uint64_t num = peak_mb * recipe::nvcc_job_mb(figures, to);
  const std::uint64_t den = std::max<std::uint64_t>(1, recipe::nvcc_job_mb(figures, from));
  return (num + den - 1) / den;
}

Expected expected_peak(const recipe::CompileMemory& figures, const std::string& lang, const std::string& source,
                       unsigned threads, std::optional<Measurement> measured) {
  threads = std::max(1u, threads);
  if (measured) {
    if (lang != "CUDA" || measured->threads == threads) return {measured->mb, "measured"};
    return {rescale_peak_mb(figures, measured->mb, measured->threads, threads),
            fmt::format("measured at {} nvcc threads, rescaled to {}", measured->threads, threads)};
  }
  for (const auto& p : figures.patterns)
    if (!source.empty() && ::fnmatch(p.glob.c_str(), source.c_str(), 0) == 0) return {p.mb, "pattern " + p.glob};
  if (lang == "C") return {figures.c_mb, "C"};
  if (lang == "CXX") return {figures.cxx_mb, "C++"};
  return {recipe::nvcc_job_mb(figures, threads),
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
