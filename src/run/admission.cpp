#include "run/admission.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
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
  std::string line = fmt::format("{}\t{}\t{}\t{}\n", source, r.peak_kb, r.waited_ms, r.exit_code);
  Fd f{::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)};
  if (f.fd >= 0) (void)!::write(f.fd, line.data(), line.size());
}

std::vector<CompileRecord> read_records(const fs::path& file) {
  std::vector<CompileRecord> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    CompileRecord r;
    std::string peak, waited, code;
    if (!std::getline(fields, r.source, '\t') || !std::getline(fields, peak, '\t') ||
        !std::getline(fields, waited, '\t') || !std::getline(fields, code))
      continue;
    try {
      r.peak_kb = std::stoull(peak);
      r.waited_ms = std::stoull(waited);
      r.exit_code = std::stoi(code);
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

}  // namespace archbuild::run
