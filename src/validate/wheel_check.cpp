#include "validate/wheel_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <regex>
#include <set>

#include "binary/archive_api.hpp"
#include "binary/elf.hpp"
#include "binary/mapped_file.hpp"
#include "binary/zip_reader.hpp"
#include "core/crypto_api.hpp"
#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"

namespace archbuild::validate {

namespace fs = std::filesystem;

namespace {

// Details list at most this many problems (a hostile wheel may have thousands); the JSON
// evidence carries the count.
constexpr std::size_t kShown = 20;

void add_problem(Check& c, std::size_t& count, std::string line) {
  if (count++ < kShown) c.details.push_back(std::move(line));
}

void finish_problems(Check& c, std::size_t count) {
  if (count > kShown) c.details.push_back(fmt::format("… and {} more", count - kShown));
}

std::vector<std::string> split_tag_set(const std::string& s) { return text::split_any(s, "."); }

// Printable form of an untrusted member name (control characters escaped).
std::string shown(std::string_view name) {
  std::string out;
  for (char ch : name) {
    auto u = static_cast<unsigned char>(ch);
    out += (u < 0x20 || u == 0x7f) ? fmt::format("\\x{:02x}", u) : std::string(1, ch);
  }
  return out;
}

bool host_elf(binary::Bytes head) {
  auto h = binary::read_elf_header(head);
  return h && h->elf_class == 2 && h->data == 1 &&
         (h->machine == binary::kEmX86_64 || h->machine == binary::kEmAarch64);
}

bool is_dist_info_file(std::string_view name) {
  auto slash = name.find('/');
  if (slash == std::string_view::npos || name.find('/', slash + 1) != std::string_view::npos) return false;
  return name.substr(0, slash).ends_with(".dist-info");
}

}  // namespace

// ---- names -------------------------------------------------------------------------------

std::string WheelName::local_label() const {
  auto plus = version.find('+');
  return plus == std::string::npos ? std::string() : version.substr(plus + 1);
}

std::string WheelName::dist_info() const { return distribution + "-" + version + ".dist-info"; }

std::vector<std::string> WheelName::tags() const {
  std::vector<std::string> out;
  for (const auto& p : python_tags)
    for (const auto& a : abi_tags)
      for (const auto& pl : platform_tags) out.push_back(p + "-" + a + "-" + pl);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<WheelName> parse_wheel_name(std::string_view file_name) {
  constexpr const char* kForm =
      "expected NAME-VERSION[-BUILD]-PYTHON-ABI-PLATFORM.whl, e.g. torch-2.7.1+cu128-cp311-cp311-linux_x86_64.whl";
  std::string f(file_name);
  if (!f.ends_with(".whl")) return Error::bad_input(fmt::format("'{}' does not end in .whl ({})", f, kForm));
  auto parts = text::split_any(std::string_view(f).substr(0, f.size() - 4), "-");
  // split_any drops empty pieces: an empty part ("a--b") must not slip through.
  std::size_t dashes = std::count(f.begin(), f.end() - 4, '-');
  if (dashes + 1 != parts.size() || (parts.size() != 5 && parts.size() != 6))
    return Error::bad_input(fmt::format("'{}' has {} dash-separated parts ({})", f, dashes + 1, kForm));
  WheelName n;
  n.file = f;
  n.distribution = parts[0];
  n.version = parts[1];
  static const std::regex dist_re("^[A-Za-z0-9]([A-Za-z0-9._]*[A-Za-z0-9])?$");
  if (!std::regex_match(n.distribution, dist_re))
    return Error::bad_input(fmt::format("'{}': distribution name '{}' has characters other than letters, digits, "
                                        "'_' and '.' ({})",
                                        f, n.distribution, kForm));
  // PEP 440, as wheels spell it (local label after '+', parts separated by '.').
  static const std::regex version_re(
      "^(v?)([0-9]+!)?[0-9]+(\\.[0-9]+)*((a|b|rc|alpha|beta|c|pre|preview)[._]?[0-9]*)?"
      "((\\.|_)?(post|rev|r)[._]?[0-9]*)?((\\.|_)?dev[._]?[0-9]*)?(\\+[A-Za-z0-9]+(\\.[A-Za-z0-9]+)*)?$",
      std::regex::icase);
  if (!std::regex_match(n.version, version_re))
    return Error::bad_input(fmt::format("'{}': version '{}' is not a PEP 440 version ({})", f, n.version, kForm));
  std::size_t at = 2;
  if (parts.size() == 6) {
    n.build = parts[2];
    if (n.build->empty() || !std::isdigit(static_cast<unsigned char>(n.build->front())))
      return Error::bad_input(fmt::format("'{}': build tag '{}' must start with a digit ({})", f, *n.build, kForm));
    at = 3;
  }
  static const std::regex tag_re("^[A-Za-z0-9_]+$");
  auto tagset = [&](const std::string& s, const char* what, std::vector<std::string>& into) -> std::optional<Error> {
    into = split_tag_set(s);
    bool ok = !into.empty() && std::count(s.begin(), s.end(), '.') + 1 == static_cast<std::ptrdiff_t>(into.size());
    for (const auto& t : into) ok = ok && std::regex_match(t, tag_re);
    if (!ok) return Error::bad_input(fmt::format("'{}': {} tag '{}' is not valid ({})", f, what, s, kForm));
    return std::nullopt;
  };
  if (auto e = tagset(parts[at], "python", n.python_tags)) return *e;
  if (auto e = tagset(parts[at + 1], "abi", n.abi_tags)) return *e;
  if (auto e = tagset(parts[at + 2], "platform", n.platform_tags)) return *e;
  return n;
}

std::string normalize_name(std::string_view name) {
  std::string out;
  bool sep = false;
  for (char ch : name) {
    if (ch == '-' || ch == '_' || ch == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out;
}

bool is_normalized_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name.front() != '-' && name.back() != '-' &&
         name.find("--") == std::string_view::npos &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

namespace {

// Digits as a number's text without leading zeros ("007" -> "7", "" -> "0").
std::string plain_number(std::string_view digits) {
  auto first = digits.find_first_not_of('0');
  return first == std::string_view::npos ? "0" : std::string(digits.substr(first));
}

}  // namespace

std::string version_key(std::string_view version) {
  std::string v;
  for (char c : version) v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string lowered = v;
  std::size_t i = 0;
  auto digits = [&] {
    std::size_t from = i;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
    return std::string_view(v).substr(from, i - from);
  };
  auto word = [&](std::initializer_list<const char*> words) -> std::string {
    for (const char* w : words)
      if (v.compare(i, std::strlen(w), w) == 0) {
        i += std::strlen(w);
        return w;
      }
    return "";
  };
  auto separator = [&] {
    if (i < v.size() && (v[i] == '.' || v[i] == '_' || v[i] == '-')) ++i;
  };
  if (i < v.size() && v[i] == 'v') ++i;
  std::string out;
  auto first = digits();
  if (first.empty()) return lowered;
  if (i < v.size() && v[i] == '!') {
    ++i;
    if (plain_number(first) != "0") out = plain_number(first) + "!";
    first = digits();
    if (first.empty()) return lowered;
  }
  std::vector<std::string> release{plain_number(first)};
  while (i + 1 < v.size() && v[i] == '.' && std::isdigit(static_cast<unsigned char>(v[i + 1]))) {
    ++i;
    release.push_back(plain_number(digits()));
  }
  while (release.size() > 1 && release.back() == "0") release.pop_back();
  out += text::join(release, ".");
  std::size_t before = i;
  separator();
  if (auto pre = word({"alpha", "beta", "preview", "pre", "rc", "a", "b", "c"}); !pre.empty()) {
    separator();
    std::string kind = pre == "alpha" || pre == "a" ? "a" : pre == "beta" || pre == "b" ? "b" : "rc";
    out += kind + plain_number(digits());
    before = i;
    separator();
  }
  if (auto post = word({"post", "rev", "r"}); !post.empty()) {
    separator();
    out += ".post" + plain_number(digits());
    before = i;
    separator();
  }
  if (auto dev = word({"dev"}); !dev.empty()) {
    separator();
    out += ".dev" + plain_number(digits());
    before = i;
  }
  i = before;
  if (i < v.size() && v[i] == '+') {
    ++i;
    std::vector<std::string> parts;
    std::string part;
    for (; i <= v.size(); ++i) {
      if (i == v.size() || v[i] == '.' || v[i] == '-' || v[i] == '_') {
        if (part.empty()) return lowered;
        bool numeric = std::all_of(part.begin(), part.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
        parts.push_back(numeric ? plain_number(part) : part);
        part.clear();
      } else if (std::isalnum(static_cast<unsigned char>(v[i]))) {
        part += v[i];
      } else {
        return lowered;
      }
    }
    out += "+" + text::join(parts, ".");
    return out;
  }
  return i == v.size() ? out : lowered;
}

std::string record_hash(std::string_view raw) {
  std::string b64(4 * ((raw.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                          reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  b64.resize(static_cast<std::size_t>(n));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  for (char& c : b64) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return "sha256=" + b64;
}

// ---- reading -----------------------------------------------------------------------------

const Member* WheelContents::member(std::string_view name) const {
  for (const auto& m : members)
    if (m.name == name) return &m;
  return nullptr;
}

std::vector<std::string> WheelContents::dist_info_dirs() const {
  std::set<std::string> dirs;
  for (const auto& m : members) {
    auto slash = m.name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = m.name.substr(0, slash);
    if (top.ends_with(".dist-info")) dirs.insert(top);
  }
  return {dirs.begin(), dirs.end()};
}

const std::string* WheelContents::text(const std::string& name) const {
  auto it = texts.find(name);
  return it == texts.end() ? nullptr : &it->second;
}

Result<WheelContents> read_wheel(binary::Bytes data, const std::string& path, const ReadOptions& options) {
  const std::string shown_path = text::quoted(path);  // in messages
  auto a = binary::open_zip(data);
  if (!a)
    return Error::bad_input(
        fmt::format("{}: not a readable zip (a wheel is a zip archive): {}", shown_path, a.error().message));
  WheelContents w;
  w.path = path;
  std::vector<std::uint8_t> chunk(1 << 20);
  archive_entry* entry = nullptr;
  std::uint64_t expanded = 0;  // every member's bytes read, bounded by the archive's size
  for (;;) {
    int r = archive_read_next_header(a->get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Error::bad_input(fmt::format("{}: not a readable zip (a wheel is a zip archive): {}", shown_path,
                                          binary::zip_header_error(a->get(), w.members.empty())));
    const char* raw = archive_entry_pathname(entry);
    if (!raw) raw = archive_entry_pathname_utf8(entry);
    if (!raw) return Error::bad_input(fmt::format("{}: a member has a name that cannot be decoded", shown_path));
    Member m;
    m.name = raw;
    auto type = archive_entry_filetype(entry);
    m.type = type == AE_IFREG ? Member::Type::file
             : type == AE_IFDIR ? Member::Type::directory
             : type == AE_IFLNK ? Member::Type::link
                                : Member::Type::other;
    if (m.type == Member::Type::file && m.name.ends_with('/')) m.type = Member::Type::directory;

    // Every byte is hashed (RECORD); ELF members are kept for the device-code reader and
    // .dist-info files as text.
    Sha256 sha;
    std::vector<std::uint8_t> keep;
    bool is_text = is_dist_info_file(m.name);
    // Whether the member is ELF is known once 4 bytes are in (a read may return fewer).
    bool decided = m.type != Member::Type::file, elf = false;
    auto decide = [&] {
      decided = true;
      elf = binary::looks_like_elf(keep);
      if (elf && host_elf(keep))
        if (auto h = binary::read_elf_header(keep)) m.machine = binary::machine_name(h->machine);
      if (elf && archive_entry_size_is_set(entry) && archive_entry_size(entry) > 0)
        keep.reserve(static_cast<std::size_t>(
            std::min<std::uint64_t>(static_cast<std::uint64_t>(archive_entry_size(entry)), options.max_member_size)));
    };
    for (;;) {
      la_ssize_t n = archive_read_data(a->get(), chunk.data(), chunk.size());
      if (n < 0) {
        const char* why = archive_error_string(a->get());
        return Error::bad_input(
            fmt::format("{}: cannot read member '{}': {}", shown_path, shown(m.name), why ? why : "unknown error"));
      }
      if (n == 0) break;
      auto got = static_cast<std::size_t>(n);
      sha.update(chunk.data(), got);
      m.size += got;
      expanded += got;
      if (auto bounded = binary::check_expansion(expanded, data.size()); !bounded)
        return Error::bad_input(fmt::format("{}: {}", shown_path, bounded.error().message));
      bool want = !decided || (elf && m.size <= options.max_member_size) || (is_text && m.size <= options.max_text_size);
      if (want)
        keep.insert(keep.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(got));
      else if (!keep.empty())
        std::vector<std::uint8_t>().swap(keep);
      if (!decided && keep.size() >= 4) decide();
    }
    if (!decided) decide();
    if (m.type == Member::Type::file) m.hash = record_hash(sha.raw());
    if (elf) {
      if (m.size > options.max_member_size) {
        w.elf_errors.push_back(fmt::format("{}: {} bytes is over the limit of {} bytes for a member", shown(m.name),
                                           m.size, options.max_member_size));
      } else if (!host_elf(keep)) {
        w.foreign_elf.push_back(m.name);
      } else {
        auto rep = binary::inspect_elf(keep, m.name);
        if (rep)
          w.elf.push_back(std::move(*rep));
        else
          w.elf_errors.push_back(rep.error().message);
        auto dyn = binary::read_dynamic(keep);
        if (!dyn)
          w.elf_errors.push_back(fmt::format("{}: dynamic section: {}", shown(m.name), dyn.error().message));
        else if (dyn->dynamic)
          w.dynamic[m.name] = std::move(*dyn);
      }
    } else if (is_text && m.type == Member::Type::file && m.size <= options.max_text_size) {
      w.texts[m.name] = std::string(keep.begin(), keep.end());
    }
    w.members.push_back(std::move(m));
  }
  std::sort(w.elf.begin(), w.elf.end(),
            [](const binary::FileReport& x, const binary::FileReport& y) { return x.path < y.path; });
  return w;
}

Result<WheelContents> read_wheel(const fs::path& path, const ReadOptions& options) {
  if (auto is_file = paths::expect_regular_file(path, "wheel"); !is_file) return is_file.error();
  auto mapped = binary::MappedFile::open(path);
  if (!mapped) return mapped.error();
  return read_wheel(mapped->bytes(), path.string(), options);
}

// ---- text formats ------------------------------------------------------------------------

std::map<std::string, std::vector<std::string>> parse_headers(std::string_view text) {
  std::map<std::string, std::vector<std::string>> out;
  std::string last;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t nl = text.find('\n', start);
    std::string_view line = text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;  // the body (METADATA's description) starts here
    if ((line.front() == ' ' || line.front() == '\t') && !last.empty()) {
      out[last].back() += " " + text::trim(line);
    } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
      last = text::trim(line.substr(0, colon));
      out[last].push_back(text::trim(line.substr(colon + 1)));
    }
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

Result<std::vector<RecordRow>> parse_record(std::string_view text) {
  std::vector<RecordRow> rows;
  std::size_t i = 0, line = 1;
  while (i < text.size()) {
    std::vector<std::string> fields(1);
    std::size_t row_line = line;
    bool quoted = false, was_quoted = false;
    for (; i < text.size(); ++i) {
      char ch = text[i];
      if (quoted) {
        if (ch == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            fields.back() += '"';
            ++i;
          } else {
            quoted = false;
          }
        } else {
          if (ch == '\n') ++line;
          fields.back() += ch;
        }
        continue;
      }
      if (ch == '"' && fields.back().empty() && !was_quoted) {
        quoted = was_quoted = true;
      } else if (ch == ',') {
        fields.emplace_back();
        was_quoted = false;
      } else if (ch == '\r') {
        continue;
      } else if (ch == '\n') {
        ++line;
        ++i;
        break;
      } else {
        fields.back() += ch;
      }
    }
    if (quoted) return Error::bad_input(fmt::format("RECORD line {}: a quoted field is not closed", row_line));
    if (fields.size() == 1 && fields[0].empty()) continue;  // blank line
    if (fields.size() != 3)
      return Error::bad_input(
          fmt::format("RECORD line {}: {} fields (expected PATH,HASH,SIZE)", row_line, fields.size()));
    rows.push_back({row_line, fields[0], fields[1], fields[2]});
  }
  return rows;
}

std::string chosen_dist_info(const WheelContents& w, const std::optional<WheelName>& name) {
  auto dirs = w.dist_info_dirs();
  if (name) {
    std::string want = name->dist_info();
    if (std::find(dirs.begin(), dirs.end(), want) != dirs.end()) return want;
    // Same project and version spelled differently (case, '-' vs '_').
    for (const auto& d : dirs) {
      std::string stem = d.substr(0, d.size() - std::string_view(".dist-info").size());
      auto dash = stem.find('-');
      if (dash != std::string::npos && normalize_name(stem.substr(0, dash)) == normalize_name(name->distribution) &&
          stem.substr(dash + 1) == name->version)
        return d;
    }
  }
  return dirs.size() == 1 ? dirs.front() : std::string();
}

// ---- checks ------------------------------------------------------------------------------

Check check_name(const std::string& file_name, const Result<WheelName>& parsed) {
  Check c;
  c.name = "wheel-name";
  if (!parsed) {
    c.status = Status::fail;
    c.summary = parsed.error().message;
    c.evidence = {{"file", file_name}};
    return c;
  }
  const auto& n = *parsed;
  c.summary = fmt::format("{} {}{}, tags {}", n.distribution, n.version, n.build ? " build " + *n.build : "",
                          text::join(n.tags(), " "));
  c.evidence = {{"file", file_name},   {"distribution", n.distribution}, {"version", n.version},
                {"tags", n.tags()},    {"local_label", n.local_label()}};
  if (n.build) c.evidence["build"] = *n.build;
  return c;
}

Check check_metadata(const WheelContents& w, const std::optional<WheelName>& name) {
  Check c;
  c.name = "metadata";
  std::size_t problems = 0;
  auto dirs = w.dist_info_dirs();
  std::string di = chosen_dist_info(w, name);
  c.evidence["dist_info"] = dirs;
  if (di.empty()) {
    c.status = Status::fail;
    c.summary = dirs.empty() ? "no .dist-info folder: not a wheel"
                             : fmt::format("{} .dist-info folders and none matches the name: {}", dirs.size(),
                                           text::join(dirs, ", "));
    return c;
  }
  if (name && di != name->dist_info())
    add_problem(c, problems, fmt::format("the metadata folder is {}, the name implies {}", di, name->dist_info()));
  if (dirs.size() > 1)
    add_problem(c, problems, fmt::format("{} .dist-info folders: {}", dirs.size(), text::join(dirs, ", ")));

  const std::string* wheel = w.text(di + "/WHEEL");
  const std::string* meta = w.text(di + "/METADATA");
  if (!wheel) add_problem(c, problems, fmt::format("{}/WHEEL is missing", di));
  if (!meta) add_problem(c, problems, fmt::format("{}/METADATA is missing", di));

  if (wheel) {
    auto h = parse_headers(*wheel);
    auto one = [&](const char* key) -> std::optional<std::string> {
      auto it = h.find(key);
      if (it == h.end() || it->second.empty()) return std::nullopt;
      return it->second.front();
    };
    auto wv = one("Wheel-Version");
    if (!wv)
      add_problem(c, problems, "WHEEL has no Wheel-Version");
    else if (!wv->starts_with("1."))
      add_problem(c, problems, fmt::format("WHEEL: Wheel-Version {} (installers know 1.x)", *wv));
    auto purelib = one("Root-Is-Purelib");
    if (!purelib)
      add_problem(c, problems, "WHEEL has no Root-Is-Purelib");
    else if (text::lower(*purelib) != "true" && text::lower(*purelib) != "false")
      add_problem(c, problems, fmt::format("WHEEL: Root-Is-Purelib is '{}' (true or false)", *purelib));
    std::vector<std::string> tags;
    if (auto it = h.find("Tag"); it != h.end()) tags = it->second;
    std::sort(tags.begin(), tags.end());
    tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
    c.evidence["wheel"] = {{"wheel_version", wv.value_or("")}, {"tags", tags}};
    if (tags.empty()) add_problem(c, problems, "WHEEL has no Tag");
    if (name && !tags.empty() && tags != name->tags())
      add_problem(c, problems, fmt::format("WHEEL tags {} differ from the name's {}", text::join(tags, " "),
                                           text::join(name->tags(), " ")));
    auto build = one("Build");
    if (name && build != name->build)
      add_problem(c, problems, fmt::format("WHEEL build '{}' differs from the name's '{}'", build.value_or(""),
                                           name->build.value_or("")));
  }
  if (meta) {
    auto h = parse_headers(*meta);
    auto one = [&](const char* key) -> std::string {
      auto it = h.find(key);
      return it == h.end() || it->second.empty() ? std::string() : it->second.front();
    };
    std::string mv = one("Metadata-Version"), mn = one("Name"), ver = one("Version");
    c.evidence["metadata"] = {{"metadata_version", mv}, {"name", mn}, {"version", ver}};
    if (mv.empty()) add_problem(c, problems, "METADATA has no Metadata-Version");
    if (mn.empty())
      add_problem(c, problems, "METADATA has no Name");
    else if (name && normalize_name(mn) != normalize_name(name->distribution))
      add_problem(c, problems, fmt::format("METADATA Name '{}' differs from the name's '{}'", mn, name->distribution));
    if (ver.empty())
      add_problem(c, problems, "METADATA has no Version");
    else if (name && text::lower(ver) != text::lower(name->version))
      add_problem(c, problems, fmt::format("METADATA Version '{}' differs from the name's '{}'", ver, name->version));
  }
  finish_problems(c, problems);
  c.evidence["problems"] = problems;
  if (problems) {
    c.status = Status::fail;
    c.summary = c.details.front();
  } else {
    c.summary = fmt::format("{}: WHEEL and METADATA present{}", di, name ? " and consistent with the name" : "");
  }
  return c;
}

Check check_record(const WheelContents& w, const std::optional<WheelName>& name) {
  Check c;
  c.name = "record";
  std::string di = chosen_dist_info(w, name);
  std::string record_name = di + "/RECORD";
  const std::string* record = di.empty() ? nullptr : w.text(record_name);
  if (!record) {
    c.status = Status::fail;
    c.summary = di.empty() ? "no .dist-info folder, so no RECORD" : record_name + " is missing";
    return c;
  }
  auto rows = parse_record(*record);
  if (!rows) {
    c.status = Status::fail;
    c.summary = fmt::format("{}: {}", record_name, rows.error().message);
    return c;
  }
  std::size_t problems = 0, checked = 0, unchecked = 0;
  std::map<std::string, const RecordRow*> listed;
  for (const auto& row : *rows) {
    if (!listed.emplace(row.path, &row).second)
      add_problem(c, problems, fmt::format("RECORD line {}: {} is listed twice", row.line, shown(row.path)));
  }
  // Every file of the wheel is listed; RECORD itself (and its signatures) may be listed without a hash.
  auto unhashed_ok = [&](const std::string& p) {
    return p == record_name || p == record_name + ".jws" || p == record_name + ".p7s";
  };
  for (const auto& m : w.members) {
    if (m.type == Member::Type::directory) continue;
    auto it = listed.find(m.name);
    if (it == listed.end()) {
      if (!unhashed_ok(m.name)) add_problem(c, problems, fmt::format("{} is not in RECORD", shown(m.name)));
      continue;
    }
    const RecordRow& row = *it->second;
    if (row.hash.empty()) {
      if (!unhashed_ok(m.name)) add_problem(c, problems, fmt::format("{}: RECORD gives no hash", shown(m.name)));
      continue;
    }
    auto eq = row.hash.find('=');
    std::string algo = eq == std::string::npos ? row.hash : row.hash.substr(0, eq);
    if (algo != "sha256") {
      // PEP 427 allows sha256 or stronger; this reader checks sha256 only.
      ++unchecked;
      if (algo == "md5" || algo == "sha1")
        add_problem(c, problems, fmt::format("{}: RECORD uses {}, which PEP 427 forbids", shown(m.name), algo));
      continue;
    }
    ++checked;
    if (row.hash != m.hash)
      add_problem(c, problems, fmt::format("{}: hash mismatch: RECORD says {}, the content is {}", shown(m.name),
                                           row.hash, m.hash));
    if (row.size.empty() || row.size != std::to_string(m.size))
      add_problem(c, problems, fmt::format("{}: size mismatch: RECORD says {}, the content is {} bytes", shown(m.name),
                                           row.size.empty() ? "nothing" : row.size, m.size));
  }
  for (const auto& [path, row] : listed)
    if (!w.member(path))
      add_problem(c, problems, fmt::format("RECORD line {}: {} is not in the wheel", row->line, shown(path)));
  finish_problems(c, problems);
  c.evidence = {{"record", record_name}, {"rows", rows->size()}, {"checked", checked}, {"problems", problems}};
  if (unchecked) c.evidence["unchecked"] = unchecked;
  if (problems) {
    c.status = Status::fail;
    c.summary = problems == 1 ? c.details.front()
                              : fmt::format("{} problems, the first: {}", problems, c.details.front());
  } else if (unchecked) {
    c.status = Status::warn;
    c.summary = fmt::format("{} hashes and sizes match; {} use an algorithm other than sha256 and were not checked",
                            checked, unchecked);
  } else {
    c.summary = fmt::format("{} files: every hash and size matches RECORD", checked);
  }
  return c;
}

Check check_members(const WheelContents& w) {
  Check c;
  c.name = "members";
  std::size_t problems = 0;
  std::set<std::string> seen;
  for (const auto& m : w.members) {
    if (binary::unsafe_member_name(m.name))
      add_problem(c, problems,
                  fmt::format("'{}' escapes the wheel root (absolute, '..', backslash or control character)",
                              shown(m.name)));
    if (!seen.insert(m.name).second)
      add_problem(c, problems, fmt::format("'{}' appears twice (installers would keep one of them)", shown(m.name)));
    if (m.type == Member::Type::link)
      add_problem(c, problems, fmt::format("'{}' is a symbolic link (a wheel holds regular files)", shown(m.name)));
    else if (m.type == Member::Type::other)
      add_problem(c, problems, fmt::format("'{}' is not a regular file", shown(m.name)));
  }
  finish_problems(c, problems);
  c.evidence = {{"members", w.members.size()}, {"problems", problems}};
  if (problems) {
    c.status = Status::fail;
    c.summary = problems == 1 ? c.details.front()
                              : fmt::format("{} unsafe members, the first: {}", problems, c.details.front());
  } else {
    c.summary = fmt::format("{} members, none escapes the wheel root", w.members.size());
  }
  return c;
}

std::vector<Check> structure_checks(const std::string& file_name, const Result<WheelName>& parsed,
                                    const WheelContents& w) {
  std::optional<WheelName> name;
  if (parsed) name = *parsed;
  return {check_name(file_name, parsed), check_metadata(w, name), check_record(w, name), check_members(w)};
}

LabelParts parse_label(std::string_view label) {
  static const std::regex cu_re("^cu([0-9]+)([0-9])$");
  static const std::regex img_re("^(sm|ptx)([0-9]+)([af]?)$");
  LabelParts p;
  for (const auto& part : text::split_any(label, ".")) {
    std::smatch m;
    std::string s = text::lower(part);
    if (std::regex_match(s, m, cu_re))
      p.cuda = m[1].str() + "." + m[2].str();
    else if (std::regex_match(s, m, img_re))
      p.images.push_back(fmt::format("{}_{}{}", m[1] == "sm" ? "sm" : "compute", m[2].str(), m[3].str()));
    else
      p.unknown.push_back(part);
  }
  return p;
}

Check check_local_label(const WheelContents& w, const std::optional<WheelName>& name,
                        const std::optional<std::string>& expected) {
  Check c;
  c.name = "local-label";
  if (!name) {
    c.status = expected ? Status::fail : Status::skip;
    c.summary = "the file name does not parse, so it has no version label to check";
    return c;
  }
  std::string label = name->local_label();
  auto parts = parse_label(label);
  c.evidence = {{"label", label}, {"cuda", parts.cuda ? nlohmann::json(*parts.cuda) : nlohmann::json(nullptr)},
                {"images", parts.images}};
  if (expected) {
    c.evidence["expected"] = *expected;
    if (label != *expected) {
      c.status = Status::fail;
      c.summary = fmt::format("the version label is '+{}', archbuild built it as '+{}'", label, *expected);
      return c;
    }
  }
  if (parts.images.empty()) {
    c.status = expected ? Status::fail : Status::skip;
    c.summary = label.empty()
                    ? "no local version label: not a wheel archbuild built (its labels name CUDA and arch, e.g. "
                      "+cu128.sm120)"
                    : fmt::format("'+{}' names no arch: not a wheel archbuild built (its labels read like "
                                  "+cu128.sm120)",
                                  label);
    return c;
  }
  if (!parts.cuda) {
    c.status = Status::fail;
    c.summary = fmt::format("'+{}' names the arch but not the CUDA (e.g. +cu128.sm120)", label);
    return c;
  }
  // The images the label names must be in the libraries (the label must not promise more).
  std::set<std::string> carried;
  for (const auto& f : w.elf)
    for (const auto& img : f.code_images()) carried.insert(img.name());
  std::vector<std::string> absent;
  for (const auto& img : parts.images)
    if (!carried.count(img)) absent.push_back(img);
  c.evidence["carried"] = std::vector<std::string>(carried.begin(), carried.end());
  if (!absent.empty()) {
    c.status = Status::fail;
    c.summary = fmt::format("'+{}' names {} but no library carries {}; they carry {}", label,
                            text::join(parts.images, " "), text::join(absent, " "),
                            carried.empty() ? "no device code" : text::join({carried.begin(), carried.end()}, " "));
    return c;
  }
  c.summary = fmt::format("'+{}' names CUDA {} and {}, which the libraries carry", label, *parts.cuda,
                          text::join(parts.images, " "));
  if (!parts.unknown.empty()) c.details.push_back("other label parts: " + text::join(parts.unknown, "."));
  return c;
}

std::string import_name(const WheelContents& w, const std::optional<WheelName>& name,
                        const std::optional<std::string>& module) {
  if (module && !module->empty()) return *module;
  std::string di = chosen_dist_info(w, name);
  std::string fallback = name ? name->distribution : std::string();
  std::replace(fallback.begin(), fallback.end(), '-', '_');
  std::replace(fallback.begin(), fallback.end(), '.', '_');
  if (const std::string* top = di.empty() ? nullptr : w.text(di + "/top_level.txt")) {
    std::vector<std::string> names;
    for (const auto& l : text::split_any(*top, "\r\n"))
      if (auto t = text::trim(l); !t.empty() && !t.starts_with("_")) names.push_back(t);
    // Several top-level names (torch ships functorch, torchgen): the one named like the project.
    for (const auto& n : names)
      if (normalize_name(n) == normalize_name(fallback)) return n;
    if (!names.empty()) return names.front();
  }
  return fallback;
}

}  // namespace archbuild::validate
