#include "stages/reproducible.hpp"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "binary/archive_api.hpp"
#include "binary/zip_reader.hpp"
#include "core/crypto_api.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"

namespace archbuild::stages {
namespace {

namespace fs = std::filesystem;

struct WriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

std::string why(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown error";
}

// A member name that could escape the folder it is unpacked into, or that tools disagree on.
std::optional<std::string> hostile(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.front() == '/') return "is absolute";
  if (name.find('\\') != std::string::npos) return "contains a backslash";
  std::size_t start = 0;
  while (start <= name.size()) {
    auto end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    if (name.compare(start, end - start, "..") == 0 && end - start == 2) return "has a '..' component";
    start = end + 1;
  }
  return std::nullopt;
}

Result<std::vector<ZipMember>> read_members(const fs::path& path) {
  auto opened = binary::open_zip(path);
  if (!opened)
    return Error::bad_input(fmt::format("{}: not a readable zip (a wheel is a zip archive): {}", path.string(),
                                        opened.error().message));
  binary::ZipReader a = std::move(*opened);
  std::vector<ZipMember> out;
  std::map<std::string, bool> seen;
  std::vector<char> chunk(1 << 20);
  archive_entry* entry = nullptr;
  for (;;) {
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Error::bad_input(fmt::format("{}: not a readable zip (a wheel is a zip archive): {}", path.string(),
                                          binary::zip_header_error(a.get(), out.empty())));
    // UTF-8 first: the name's bytes as stored, whatever this process's locale.
    const char* raw = archive_entry_pathname_utf8(entry);
    if (!raw) raw = archive_entry_pathname(entry);
    if (!raw) return Error::bad_input(fmt::format("{}: a member has a name that cannot be decoded", path.string()));
    ZipMember m;
    m.name = raw;
    if (auto bad = hostile(m.name))
      return Error::bad_input(fmt::format("{}: member name '{}' {}: wheel members are relative paths with '/' "
                                          "separators and no '..'",
                                          path.string(), m.name, *bad));
    auto type = archive_entry_filetype(entry);
    if (type == AE_IFDIR || (type == AE_IFREG && m.name.ends_with('/'))) {
      m.directory = true;
    } else if (type != AE_IFREG) {
      return Error::bad_input(fmt::format("{}: member '{}' is a link or special file: a wheel holds only files",
                                          path.string(), m.name));
    }
    if (m.directory && !m.name.ends_with('/')) m.name += '/';
    m.executable = !m.directory && (archive_entry_perm(entry) & 0111) != 0;
    if (!seen.emplace(m.name, true).second)
      return Error::bad_input(fmt::format("{}: member '{}' appears twice", path.string(), m.name));
    for (;;) {
      la_ssize_t n = archive_read_data(a.get(), chunk.data(), chunk.size());
      if (n < 0)
        return Error::bad_input(
            fmt::format("{}: cannot read member '{}': {}", path.string(), m.name, why(a.get())));
      if (n == 0) break;
      m.data.append(chunk.data(), static_cast<std::size_t>(n));
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + '"';
}

// libarchive's zip writer turns the mtime into the DOS date with localtime(); the same wheel
// must not depend on the build host's time zone, so the write runs with TZ=UTC (restored after).
class UtcScope {
 public:
  UtcScope() {
    if (const char* tz = std::getenv("TZ")) old_ = tz;
    ::setenv("TZ", "UTC0", 1);
    ::tzset();
  }
  ~UtcScope() {
    if (old_)
      ::setenv("TZ", old_->c_str(), 1);
    else
      ::unsetenv("TZ");
    ::tzset();
  }
  UtcScope(const UtcScope&) = delete;
  UtcScope& operator=(const UtcScope&) = delete;

 private:
  std::optional<std::string> old_;
};

Result<Ok> write_zip(const fs::path& tmp, const std::vector<ZipMember>& members, std::int64_t mtime) {
  std::unique_ptr<archive, WriteFree> a(archive_write_new());
  if (!a) return Error::bad_input(fmt::format("{}: cannot allocate a zip writer", tmp.string()));
  archive_write_set_format_zip(a.get());
  // hdrcharset=UTF-8: the UTF-8 name flag is set from the option, not from this process's locale.
  if (archive_write_set_options(a.get(), "zip:compression=deflate,zip:hdrcharset=UTF-8") != ARCHIVE_OK)
    return Error::bad_input(fmt::format("{}: zip writer options refused: {}", tmp.string(), why(a.get())));
  // No padding of the last block: the file ends where the zip does.
  archive_write_set_bytes_in_last_block(a.get(), 1);
  if (archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK)
    return Error::bad_input(fmt::format("{}: cannot write: {}", tmp.string(), why(a.get())));
  UtcScope utc;
  for (const auto& m : members) {
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
#if ARCHIVE_VERSION_NUMBER < 3005000
    // libarchive before 3.5 (Debian 11's 3.4, in the release bundle: docs/bundle.md) cannot give
    // the zip writer a name set in UTF-8 only (a null name, SIGSEGV). The name in this process's
    // locale works for ASCII names; a non-ASCII one is refused with libarchive's message.
    archive_entry_set_pathname(e.get(), m.name.c_str());
#else
    archive_entry_set_pathname_utf8(e.get(), m.name.c_str());
#endif
    archive_entry_set_filetype(e.get(), m.directory ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e.get(), m.directory || m.executable ? 0755 : 0644);
    archive_entry_set_size(e.get(), m.directory ? 0 : static_cast<la_int64_t>(m.data.size()));
    archive_entry_set_mtime(e.get(), static_cast<time_t>(mtime), 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK)
      return Error::bad_input(fmt::format("{}: cannot write member '{}': {}", tmp.string(), m.name, why(a.get())));
    std::size_t off = 0;
    while (off < m.data.size()) {
      la_ssize_t n = archive_write_data(a.get(), m.data.data() + off, m.data.size() - off);
      if (n <= 0)
        return Error::bad_input(
            fmt::format("{}: cannot write member '{}': {}", tmp.string(), m.name, why(a.get())));
      off += static_cast<std::size_t>(n);
    }
    if (archive_write_finish_entry(a.get()) != ARCHIVE_OK)
      return Error::bad_input(fmt::format("{}: cannot write member '{}': {}", tmp.string(), m.name, why(a.get())));
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    return Error::bad_input(fmt::format("{}: cannot finish the zip: {}", tmp.string(), why(a.get())));
  return Ok{};
}

bool is_record(const std::string& name, const std::string& dist_info) { return name == dist_info + "RECORD"; }

// Writes via `out`.tmp, renamed into place; nothing at `out` on error.
Result<Ok> write_replacing(const fs::path& out, const std::vector<ZipMember>& members, std::int64_t mtime) {
  fs::path tmp = out;
  tmp += ".tmp";
  auto wrote = write_zip(tmp, members, mtime);
  std::error_code ec;
  if (!wrote) {
    fs::remove(tmp, ec);
    return wrote.error();
  }
  fs::rename(tmp, out, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    return Error::bad_input(fmt::format("{}: cannot move the rewritten wheel into place: {}", out.string(), ec.message()));
  }
  return Ok{};
}

}  // namespace

Result<std::vector<ZipMember>> read_zip_members(const fs::path& wheel) { return read_members(wheel); }

Result<Ok> write_zip_members(const fs::path& out, const std::vector<ZipMember>& members) {
  return write_replacing(out, members, zip_epoch_min);
}

std::string record_digest(const std::string& raw_digest) {
  std::string b64(4 * ((raw_digest.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                          reinterpret_cast<const unsigned char*>(raw_digest.data()), static_cast<int>(raw_digest.size()));
  b64.resize(static_cast<std::size_t>(n));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  for (char& c : b64) {
    if (c == '+') c = '-';
    else if (c == '/') c = '_';
  }
  return "sha256=" + b64;
}

std::optional<std::string> source_date_epoch_problem(std::string_view value) {
  bool digits = !value.empty() && value.size() <= 18 &&
                std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::int64_t v = digits ? std::stoll(std::string(value)) : -1;
  if (digits && v >= zip_epoch_min && v <= zip_epoch_max) return std::nullopt;
  return fmt::format("SOURCE_DATE_EPOCH {}: expected whole seconds since 1970 between {} (1980-01-01, the first time a "
                     "zip holds) and {} (2107-12-31, the last)",
                     text::quoted(value), zip_epoch_min, zip_epoch_max);
}

Result<Ok> normalize_wheel(const fs::path& in, const fs::path& out, std::int64_t epoch) {
  auto read = read_members(in);
  if (!read) return read.error();
  std::vector<ZipMember> members = std::move(*read);

  // The one top-level *.dist-info folder holds RECORD (PEP 427).
  std::vector<std::string> dist_infos;
  for (const auto& m : members) {
    auto slash = m.name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = m.name.substr(0, slash + 1);
    if (top.size() > 11 && top.ends_with(".dist-info/") &&
        std::find(dist_infos.begin(), dist_infos.end(), top) == dist_infos.end())
      dist_infos.push_back(top);
  }
  if (dist_infos.size() != 1)
    return Error::bad_input(fmt::format("{}: {} top-level *.dist-info folders: a wheel has exactly one", in.string(),
                                        dist_infos.empty() ? "no" : std::to_string(dist_infos.size())));
  const std::string& dist_info = dist_infos.front();

  // The old RECORD goes; a new one is made from the bytes.
  std::erase_if(members, [&](const ZipMember& m) { return is_record(m.name, dist_info); });
  std::sort(members.begin(), members.end(), [](const ZipMember& x, const ZipMember& y) { return x.name < y.name; });

  std::string record;
  for (const auto& m : members) {
    if (m.directory) continue;  // RECORD lists files
    Sha256 sha;
    sha.update(m.data);
    record += fmt::format("{},{},{}\n", csv_field(m.name), record_digest(sha.raw()), m.data.size());
  }
  record += csv_field(dist_info + "RECORD") + ",,\n";
  members.push_back(ZipMember{dist_info + "RECORD", false, false, std::move(record)});

  return write_replacing(out, members, std::clamp<std::int64_t>(epoch, zip_epoch_min, zip_epoch_max));
}

Result<std::vector<std::string>> compare_members(const fs::path& a, const fs::path& b) {
  // name -> (digest, executable)
  auto index = [](const fs::path& p) -> Result<std::map<std::string, std::pair<std::string, bool>>> {
    auto r = read_members(p);
    if (!r) return r.error();
    std::map<std::string, std::pair<std::string, bool>> m;
    for (auto& z : *r) {
      Sha256 sha;
      sha.update(z.data);
      m[z.name] = {sha.raw(), z.executable};
    }
    return m;
  };
  auto ia = index(a);
  if (!ia) return ia.error();
  auto ib = index(b);
  if (!ib) return ib.error();
  std::vector<std::string> diff;
  for (const auto& [name, v] : *ia) {
    auto it = ib->find(name);
    if (it == ib->end() || it->second != v) diff.push_back(name);
  }
  for (const auto& [name, v] : *ib)
    if (!ia->count(name)) diff.push_back(name);
  std::sort(diff.begin(), diff.end());
  return diff;
}

std::vector<std::string> differing_members(const fs::path& a, const fs::path& b) {
  return compare_members(a, b).take();
}

}  // namespace archbuild::stages
