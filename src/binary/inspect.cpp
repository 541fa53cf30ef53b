#include "binary/inspect.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <memory>
#include <tuple>

#include "binary/archive_api.hpp"
#include "binary/elf.hpp"
#include "binary/mapped_file.hpp"
#include "binary/zip_reader.hpp"
#include "core/path_kind.hpp"
#include "core/spread_thread.hpp"
#include "core/text.hpp"

namespace archbuild::binary {

namespace fs = std::filesystem;

namespace {

bool is_host_machine(std::uint16_t m) { return m == kEmX86_64 || m == kEmAarch64; }

// An ELF file that cannot carry host code for x86-64/aarch64 (a cubin, a 32-bit library):
// skipped inside wheels and directories, refused when named on its own.
bool foreign_elf(Bytes data) {
  if (!looks_like_elf(data) || data.size() < 0x14) return false;
  if (data[4] != 2 || data[5] != 1) return true;
  std::uint16_t machine = load<std::uint16_t>(data, 0x12);
  return !is_host_machine(machine);
}

std::vector<ImageCount> count_images(const FileReport& r, bool relocatable) {
  std::map<std::tuple<EntryKind, int, arch::Variant>, ImageCount> seen;
  for (const auto& c : r.containers) {
    if ((c.placement == Placement::relocatable) != relocatable) continue;
    for (const auto& e : c.entries) {
      auto& ic = seen[{e.kind, e.sm, e.variant}];
      ic.kind = e.kind;
      ic.sm = e.sm;
      ic.variant = e.variant;
      ++ic.count;
      ++ic.compression[e.compression];
    }
  }
  std::vector<ImageCount> out;
  for (auto& [key, ic] : seen) out.push_back(std::move(ic));
  return out;
}

// Printable member names: unsafe_member_name already refused control characters.
std::string member_path(const std::string& archive, const std::string& member) { return archive + "!" + member; }

// One file of a directory: not ELF, a foreign ELF (skipped), a report, or an error.
struct FileOutcome {
  bool elf = false;
  std::optional<FileReport> report;
  std::optional<Error> error;
};

constexpr std::size_t kMaxThreads = 4;

FileOutcome inspect_file(const fs::path& f, const InspectOptions& options) {
  FileOutcome o;
  auto mapped = MappedFile::open(f);
  if (!mapped) {
    o.error = mapped.error();
    return o;
  }
  Bytes b = mapped->bytes();
  o.elf = looks_like_elf(b);
  if (!o.elf || foreign_elf(b)) return o;
  auto reader = ByteReader::open(f);
  if (!reader) {
    o.error = reader.error();
    return o;
  }
  auto report = inspect_elf(b, f.string(), options, &*reader);
  if (report)
    o.report = std::move(*report);
  else
    o.error = report.error();
  return o;
}

}  // namespace

bool FileReport::has_device_code() const {
  return std::any_of(containers.begin(), containers.end(), [](const Container& c) { return !c.entries.empty(); });
}

std::size_t FileReport::entry_count() const {
  std::size_t n = 0;
  for (const auto& c : containers) n += c.entries.size();
  return n;
}

std::vector<ImageCount> FileReport::runtime_images() const { return count_images(*this, false); }
std::vector<ImageCount> FileReport::relocatable_images() const { return count_images(*this, true); }

std::map<Compression, std::size_t> FileReport::compression() const {
  std::map<Compression, std::size_t> out;
  for (const auto& c : containers)
    for (const auto& e : c.entries) ++out[e.compression];
  return out;
}

std::vector<arch::CodeImage> FileReport::code_images() const {
  std::vector<arch::CodeImage> out;
  for (const auto& ic : runtime_images()) {
    if (ic.kind == EntryKind::lto_ir) continue;  // LTO-IR needs nvJitLink; the driver cannot load it
    arch::CodeImage img;
    img.kind = ic.kind == EntryKind::ptx ? arch::CodeKind::ptx : arch::CodeKind::sass;
    img.cc = arch::Cc::from_sm(ic.sm);
    img.variant = ic.variant;
    out.push_back(img);
  }
  return out;
}

bool unsafe_member_name(std::string_view name) {
  if (name.empty() || name.front() == '/') return true;
  if (name.size() >= 2 && name[1] == ':') return true;  // C:foo on Windows
  for (char ch : name) {
    auto u = static_cast<unsigned char>(ch);
    if (ch == '\\' || u < 0x20 || u == 0x7f) return true;
  }
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t slash = name.find('/', start);
    std::string_view part =
        name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

Result<FileReport> inspect_elf(Bytes data, const std::string& path, const InspectOptions& options,
                               ByteReader* file) {
  auto elf = read_elf(data);
  if (!elf) return Error::bad_input(fmt::format("{}: {}", path, elf.error().message));
  if (!is_host_machine(elf->header.machine))
    return Error::bad_input(
        fmt::format("{}: ELF for {} (expected an x86-64 or aarch64 file)", path, machine_name(elf->header.machine)));
  ByteReader memory(data);
  if (file && file->size() != data.size())
    return Error::bad_input(fmt::format("{}: the file changed size while it was read", path));
  const unsigned threads = options.threads ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  auto containers = read_containers(file ? *file : memory, *elf, options.scan, threads);
  if (!containers) return Error::bad_input(fmt::format("{}: {}", path, containers.error().message));
  FileReport r;
  r.path = path;
  r.machine = machine_name(elf->header.machine);
  r.containers = std::move(*containers);
  if (options.verify) {
    r.verified = true;
    for (const auto& c : r.containers)
      for (const auto& e : c.entries) {
        auto v = verify_entry(data, e, options.verify_options);
        if (v.status == VerifyStatus::mismatch) r.problems.push_back({e.offset, e.name(), std::move(v.message)});
        if (v.status == VerifyStatus::unchecked && r.unchecked++ == 0) r.unchecked_reason = std::move(v.message);
      }
  }
  return r;
}

Result<Inspection> inspect_zip(Bytes data, const std::string& path, const InspectOptions& options) {
  auto a = open_zip(data);
  if (!a) return Error::bad_input(fmt::format("{}: not a readable zip: {}", path, a.error().message));
  Inspection out;
  std::size_t elf_members = 0;
  std::uint64_t expanded = 0;  // members' bytes read, bounded by the archive's size
  archive_entry* entry = nullptr;
  bool first = true;
  for (;;) {
    int r = archive_read_next_header(a->get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Error::bad_input(fmt::format("{}: not a readable zip: {}", path, zip_header_error(a->get(), first)));
    first = false;
    const char* raw = archive_entry_pathname(entry);
    if (!raw) raw = archive_entry_pathname_utf8(entry);
    if (!raw) return Error::bad_input(fmt::format("{}: a member has a name that cannot be decoded", path));
    std::string name(raw);
    if (unsafe_member_name(name)) {
      std::string shown;
      for (char ch : name) {
        auto u = static_cast<unsigned char>(ch);
        shown += (u < 0x20 || u == 0x7f) ? fmt::format("\\x{:02x}", u) : std::string(1, ch);
      }
      return Error::bad_input(fmt::format(
          "{}: member '{}' has an unsafe path (absolute, '..', backslash or control character); refusing the archive",
          path, shown));
    }
    if (archive_entry_filetype(entry) != AE_IFREG) continue;

    // Read 4 bytes to see whether the member is ELF; skip it otherwise.
    std::vector<std::uint8_t> buf(4);
    std::size_t have = 0;
    while (have < 4) {
      la_ssize_t n = archive_read_data(a->get(), buf.data() + have, 4 - have);
      if (n < 0) {
        const char* why = archive_error_string(a->get());
        return Error::bad_input(
            fmt::format("{}: cannot read: {}", member_path(path, name), why ? why : "unknown error"));
      }
      if (n == 0) break;
      have += static_cast<std::size_t>(n);
    }
    buf.resize(have);
    expanded += have;
    if (!looks_like_elf(buf)) continue;
    if (archive_entry_size_is_set(entry) &&
        static_cast<std::uint64_t>(archive_entry_size(entry)) > options.max_member_size)
      return Error::bad_input(fmt::format("{}: {} bytes is over the limit of {} bytes for a member",
                                          member_path(path, name), archive_entry_size(entry), options.max_member_size));
    constexpr std::size_t kChunk = 1 << 20;
    if (archive_entry_size_is_set(entry) && archive_entry_size(entry) > 0)
      buf.reserve(static_cast<std::size_t>(std::min<std::int64_t>(archive_entry_size(entry), std::int64_t{1} << 32)) +
                  kChunk);
    for (;;) {
      // The declared size may lie: the limit holds for what is actually read.
      if (buf.size() > options.max_member_size)
        return Error::bad_input(
            fmt::format("{}: member is over the limit of {} bytes", member_path(path, name), options.max_member_size));
      std::size_t at = buf.size();
      buf.resize(at + kChunk);
      la_ssize_t n = archive_read_data(a->get(), buf.data() + at, kChunk);
      if (n < 0) {
        const char* why = archive_error_string(a->get());
        return Error::bad_input(
            fmt::format("{}: cannot read: {}", member_path(path, name), why ? why : "unknown error"));
      }
      buf.resize(at + static_cast<std::size_t>(n));
      if (n == 0) break;
      // The members' bytes in all, bounded by the archive's own size (a zip bomb's member that
      // begins with an ELF header held 3 GiB in memory from a 3 MB file).
      expanded += static_cast<std::uint64_t>(n);
      if (auto bounded = check_expansion(expanded, data.size()); !bounded)
        return Error::bad_input(fmt::format("{}: {}", path, bounded.error().message));
    }
    ++elf_members;
    if (foreign_elf(buf)) {
      out.skipped.push_back(member_path(path, name));
      continue;
    }
    auto report = inspect_elf(buf, member_path(path, name), options);
    if (!report) return report.error();
    out.files.push_back(std::move(*report));
  }
  if (elf_members == 0)
    return Error::bad_input(fmt::format("{}: no ELF files in this archive (nothing to inspect)", path));
  std::sort(out.files.begin(), out.files.end(),
            [](const FileReport& x, const FileReport& y) { return x.path < y.path; });
  return out;
}

Result<Inspection> inspect_path(const fs::path& path, const InspectOptions& options) {
  std::error_code ec;
  // A directory is walked; anything else must be a regular file (said by what it is otherwise).
  const bool directory = paths::classify(path).kind == paths::Kind::directory;
  if (!directory)
    if (auto is_file = paths::expect_regular_file(path, "inspect: file"); !is_file) return is_file.error();
  Inspection out;
  if (directory) {
    std::vector<fs::path> files;
    std::size_t not_read = 0;  // links, FIFOs, sockets, devices: never opened
    fs::recursive_directory_iterator it(path, ec), end;
    if (ec) return Error::bad_input(fmt::format("{}: cannot read directory: {}", text::quoted(path.string()), ec.message()));
    for (; it != end; it.increment(ec)) {
      if (ec) return Error::bad_input(fmt::format("{}: cannot read directory: {}", text::quoted(path.string()), ec.message()));
      // Links are not followed: a library's soname links would count it twice, and a link to a
      // directory could loop.
      if (it->is_symlink(ec) || !it->is_regular_file(ec)) {
        if (!it->is_directory(ec) || it->is_symlink(ec)) ++not_read;
        continue;
      }
      files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    // Files are independent: read on a few threads (pread has no shared lock), reported in path
    // order, and the first error in path order is the one returned, as one by one.
    // Largest first, so one large library read last does not leave the other threads idle.
    std::vector<FileOutcome> outcomes(files.size());
    std::vector<std::pair<std::uintmax_t, std::size_t>> order;
    for (std::size_t i = 0; i < files.size(); ++i) {
      auto size = fs::file_size(files[i], ec);
      order.emplace_back(ec ? 0 : size, i);
    }
    std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    InspectOptions per_file = options;
    if (files.size() > 1) per_file.threads = 1;
    std::atomic<std::size_t> next{0};
    auto work = [&] {
      for (std::size_t k; (k = next++) < order.size();) {
        std::size_t i = order[k].second;
        outcomes[i] = inspect_file(files[i], per_file);
      }
    };
    std::size_t threads = std::min<std::size_t>(
        files.size(), options.threads ? options.threads
                                      : std::min<std::size_t>(kMaxThreads, std::max(1u, std::thread::hardware_concurrency())));
    run_spread(threads, [&](std::size_t) { work(); });
    // Every file that could not be read is said, counted, not only the first: a folder of
    // 10,000 libraries this user cannot open is 10,000 files not inspected, never a report that
    // reads as "no device code" (exit 2, the first few named).
    std::vector<std::size_t> failed;
    for (std::size_t i = 0; i < files.size(); ++i)
      if (outcomes[i].error) failed.push_back(i);
    if (failed.size() == 1) return *outcomes[failed[0]].error;
    if (!failed.empty()) {
      std::vector<std::string> first;
      for (std::size_t k = 0; k < std::min<std::size_t>(3, failed.size()); ++k) first.push_back(outcomes[failed[k]].error->message);
      Error e = *outcomes[failed[0]].error;
      e.message = fmt::format("{}: {} of its {} files could not be read: {}{}", text::quoted(path.string()), failed.size(),
                              files.size(), text::join(first, "; "),
                              failed.size() > first.size() ? fmt::format("; and {} more", failed.size() - first.size()) : "");
      e.context.clear();
      e.context_chars = 0;
      return e;
    }
    std::size_t elf_files = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
      auto& o = outcomes[i];
      if (!o.elf) continue;
      ++elf_files;
      if (o.report)
        out.files.push_back(std::move(*o.report));
      else
        out.skipped.push_back(files[i].string());
    }
    if (elf_files == 0)
      return Error::bad_input(fmt::format(
          "{}: no ELF files in this directory (expected shared libraries or executables{})", text::quoted(path.string()),
          not_read ? fmt::format("; {} entries are links, FIFOs, sockets or devices, which are not read", not_read) : ""));
    return out;
  }
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  Bytes b = mapped->bytes();
  if (b.empty())
    return Error::bad_input(fmt::format("{}: empty file (expected an ELF file, a wheel or a zip)", text::quoted(path.string())));
  if (looks_like_elf(b)) {
    auto reader = ByteReader::open(path);
    if (!reader) return reader.error();
    auto report = inspect_elf(b, path.string(), options, &*reader);
    if (!report) return report.error();
    out.files.push_back(std::move(*report));
    return out;
  }
  if (b.size() >= 4 && b[0] == 'P' && b[1] == 'K') return inspect_zip(b, path.string(), options);
  std::string start;
  for (std::size_t i = 0; i < std::min<std::size_t>(4, b.size()); ++i) start += fmt::format("{:02x}", b[i]);
  return Error::bad_input(fmt::format(
      "{}: not an ELF file, a wheel or a zip (starts with {}; expected 7f454c46 or 504b)", text::quoted(path.string()), start));
}

}  // namespace archbuild::binary
