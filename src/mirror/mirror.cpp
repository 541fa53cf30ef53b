#include "mirror/mirror.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "binary/mapped_file.hpp"
#include "core/path_kind.hpp"
#include "core/sha256.hpp"
#include "core/text.hpp"
#include "store/atomic_file.hpp"
#include "store/lock.hpp"
#include "validate/closure.hpp"
#include "validate/wheel_check.hpp"
#include "mirror/variants.hpp"
#include "mirror/views.hpp"

namespace archbuild::mirror {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kManifest = "manifest.json";

std::string utc(std::time_t t) { return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(t)); }

std::string now_utc() { return utc(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())); }

struct Hashed {
  std::string sha256;
  std::uint64_t size = 0;
};

// Streams `src` into an AtomicFile at `dst` (temp + rename), hashing what is copied.
Result<Hashed> copy_atomic(const fs::path& src, const fs::path& dst) {
  if (auto k = paths::expect_regular_file(src, "wheel"); !k) return k.error();
  std::ifstream in(src, std::ios::binary);
  if (!in) return Error::bad_input(fmt::format("{}: cannot read", src.string()));
  auto f = store::AtomicFile::open(dst);
  if (!f) return f.error();
  Sha256 h;
  Hashed out;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto n = static_cast<std::size_t>(in.gcount());
    if (n == 0) break;
    h.update(buf.data(), n);
    out.size += n;
    if (auto w = f->write(buf.data(), n); !w) return w.error();
  }
  if (in.bad()) return Error::bad_input(fmt::format("{}: read error", src.string()));
  out.sha256 = h.hex();
  if (auto c = f->commit(); !c) return c.error();
  return out;
}

Result<Hashed> hash_file(const fs::path& p) {
  auto h = sha256_file_hex(p);
  if (!h) return h.error();
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec) return Error::bad_input(fmt::format("{}: {}", p.string(), ec.message()));
  return Hashed{*h, size};
}

// Every <a href="…"> of a page, read by hand: the page's bytes may be anyone's, and std::regex
// recurses once per character.
std::vector<std::string> hrefs(const std::string& page) {
  std::vector<std::string> out;
  static constexpr std::string_view open = "<a href=\"";
  for (auto at = page.find(open); at != std::string::npos; at = page.find(open, at)) {
    at += open.size();
    auto close = page.find('"', at);
    if (close == std::string::npos) break;
    out.push_back(page.substr(at, close - at));
    at = close + 1;
  }
  return out;
}

// What makes two files one release file for pip: the PEP 503 project, the PEP 440 version
// (1.0 == 1.0.0), the build tag and the tags. Two files of one identity with other bytes would
// let `pip download X==1.0` change what it gets: immutability holds by identity, not by spelling.
std::string identity(const validate::WheelName& n) {
  std::string tags;
  for (const auto& t : n.tags()) {
    for (char c : t) tags += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    tags += ',';
  }
  return fmt::format("{} {} {} {}", validate::normalize_name(n.distribution), validate::version_key(n.version),
                     n.build.value_or(""), tags);
}

std::optional<std::string> identity_of_file(const std::string& file) {
  auto n = validate::parse_wheel_name(file);
  if (!n) return std::nullopt;
  return identity(*n);
}

// What is at files/<name> when it is something other than a regular file (not followed), for the
// refusal; nullopt for a regular file or nothing.
std::optional<std::string> not_a_file(const fs::path& p) {
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return std::nullopt;
  if (S_ISLNK(st.st_mode)) return std::string("is a symbolic link");
  return paths::describe(paths::classify(p));
}

std::map<std::string, std::vector<Entry>> by_project(const Manifest& m) {
  std::map<std::string, std::vector<Entry>> out;
  for (const auto& [name, e] : m.files) out[e.project].push_back(e);
  return out;
}

json project_json(const std::string& project, const std::vector<Entry>& entries) {
  json files = json::array();
  for (const auto& e : entries)
    files.push_back({{"filename", e.file},
                     {"url", "../../files/" + percent_encode(e.file)},
                     {"hashes", {{"sha256", e.sha256}}},
                     {"size", e.size},
                     {"upload-time", e.published_at}});
  return {{"meta", {{"api-version", "1.1"}}}, {"name", project}, {"files", files}, {"versions", json::array()}};
}

// Every page from the manifest (only the changed ones are written).
Result<Ok> write_pages(const fs::path& dir, const Manifest& m) {
  auto projects = by_project(m);
  std::vector<std::string> names;
  for (auto& [project, entries] : projects) {
    names.push_back(project);
    auto pdir = dir / "simple" / project;
    if (auto w = write_if_changed(pdir / "index.html", project_page(project, entries)); !w) return w.error();
    json pj = project_json(project, entries);
    std::set<std::string> versions;
    for (const auto& e : entries) versions.insert(e.version);
    pj["versions"] = versions;
    if (auto w = write_if_changed(pdir / "index.json", pj.dump(1) + "\n"); !w) return w.error();
  }
  if (auto w = write_if_changed(dir / "simple" / "index.html", root_page(names)); !w) return w.error();
  json projects_json = json::array();
  for (const auto& n : names) projects_json.push_back({{"name", n}});
  json root = {{"meta", {{"api-version", "1.1"}}}, {"projects", projects_json}};
  if (auto w = write_if_changed(dir / "simple" / "index.json", root.dump(1) + "\n"); !w) return w.error();
  return Ok{};
}

// The wheel `w` as publish takes it: a regular file whose structure passes what validate checks
// first (name, METADATA and WHEEL against the name, RECORD, members), hashed from the same bytes
// that were checked. A published name is taken for good, so a broken wheel must not take it.
Result<Hashed> checked_wheel(const fs::path& w) {
  if (auto is_file = paths::expect_regular_file(w, "publish: wheel"); !is_file) return is_file.error();
  auto mapped = binary::MappedFile::open(w);
  if (!mapped) return mapped.error();
  auto file = w.filename().string();
  auto parsed = validate::parse_wheel_name(file);
  if (!parsed) return Error::bad_input(fmt::format("publish: wheel {}: {}", text::quoted(w.string()), parsed.error().message));
  validate::ReadOptions structure_only;
  structure_only.max_member_size = 0;  // ELF members hashed for RECORD, not kept for the device-code reader
  if (mapped->size() == 0)
    return Error::bad_input(fmt::format("publish: wheel {}: an empty file (a wheel is a zip archive)", text::quoted(w.string())));
  // The reader's messages start with the quoted path.
  auto contents = validate::read_wheel(mapped->bytes(), w.string(), structure_only);
  if (!contents) return Error::bad_input("publish: wheel " + contents.error().message);
  for (const auto& c : validate::structure_checks(file, parsed, *contents))
    if (c.status == validate::Status::fail)
      return Error::bad_input(fmt::format("publish: wheel {} is not a valid wheel ({}: {}); nothing was published",
                                          text::quoted(w.string()), c.name, c.summary));
  // A library for another machine than the tag's would install and fail at import: the name
  // would be taken by a wheel that runs nowhere it is offered.
  if (auto wrong = validate::machine_problems(parsed->platform_tags, validate::elf_machines(contents->members));
      !wrong.empty())
    return Error::bad_input(fmt::format("publish: wheel {} is not a valid wheel (platform-tag: {}); nothing was published",
                                        text::quoted(w.string()), text::join(wrong, "; ")));
  Sha256 h;
  h.update(mapped->bytes().data(), mapped->size());
  return Hashed{h.hex(), mapped->size()};
}

// Adds to `m` every wheel in DIR/files that it does not list (a manifest lost, replaced by an
// older copy, or a publish that died between its file and its manifest). Returns how many.
// Names starting with '.' are temp files of a publish in progress or killed.
Result<std::size_t> adopt_files(const fs::path& dir, Manifest& m) {
  std::error_code ec;
  std::size_t added = 0;
  fs::directory_iterator it(dir / "files", ec), end;
  if (ec) return Error::bad_input(fmt::format("--mirror {}: files/: {}", text::quoted(dir.string()), ec.message()));
  std::vector<fs::path> found;
  for (; it != end; it.increment(ec)) found.push_back(it->path());
  if (ec) return Error::bad_input(fmt::format("--mirror {}: files/: {}", text::quoted(dir.string()), ec.message()));
  for (const auto& p : found) {
    auto file = p.filename().string();
    if (file.starts_with(".") || m.files.count(file)) continue;
    // Never replaced, and never listed when it is not a sound wheel: the user decides.
    auto h = fs::is_symlink(fs::symlink_status(p, ec)) ? Result<Hashed>(Error::bad_input("a symbolic link"))
                                                      : checked_wheel(p);
    if (!h)
      return Error::not_fine(fmt::format(
          "--mirror {}: {} is not in manifest.json and cannot be listed ({}); move it away, then publish again",
          text::quoted(dir.string()), text::quoted("files/" + file), h.error().message));
    auto name = validate::parse_wheel_name(file);
    // When it was published: when its file was written (renamed into place).
    struct stat st {};
    std::string at = ::stat(p.c_str(), &st) == 0 ? utc(st.st_mtime) : now_utc();
    m.files[file] = Entry{file, validate::normalize_name(name->distribution), name->version, h->sha256, h->size, at};
    ++added;
  }
  return added;
}

}  // namespace

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string file_href(const Entry& e) { return "../../files/" + percent_encode(e.file) + "#sha256=" + e.sha256; }

std::string project_page(const std::string& project, const std::vector<Entry>& entries) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html>\n<head>\n<meta name=\"pypi:repository-version\" content=\"1.1\">\n"
      "<title>Links for {0}</title>\n</head>\n<body>\n<h1>Links for {0}</h1>\n",
      html_escape(project));
  for (const auto& e : entries)
    out += fmt::format("<a href=\"{}\">{}</a><br>\n", html_escape(file_href(e)), html_escape(e.file));
  out += "</body>\n</html>\n";
  return out;
}

std::string root_page(const std::vector<std::string>& projects) {
  std::string out =
      "<!DOCTYPE html>\n<html>\n<head>\n<meta name=\"pypi:repository-version\" content=\"1.1\">\n"
      "<title>Simple index</title>\n</head>\n<body>\n";
  for (const auto& p : projects) out += fmt::format("<a href=\"{0}/\">{0}</a><br>\n", html_escape(p));
  out += "</body>\n</html>\n";
  return out;
}

json to_json(const Manifest& m) {
  json files = json::object();
  for (const auto& [name, e] : m.files)
    files[name] = {{"project", e.project},
                   {"version", e.version},
                   {"sha256", e.sha256},
                   {"size", e.size},
                   {"published_at", e.published_at}};
  for (const auto& [name, e] : m.files)
    if (!e.gpu.is_null()) files[name]["gpu"] = e.gpu;
  return {{"format", 1}, {"files", files}};
}

Result<Manifest> read_manifest(const fs::path& dir) {
  Manifest m;
  auto path = dir / kManifest;
  auto bad = [&](const std::string& why) {
    return Error::not_fine(fmt::format("{}: {} (move it away and publish again: the manifest is rebuilt from files/)",
                                       path.string(), why));
  };
  // What it is before it is opened: a FIFO there would block the read forever.
  auto is = paths::classify(path);
  if (is.kind == paths::Kind::missing) return m;
  if (is.kind != paths::Kind::regular) return bad(paths::describe(is));
  auto text = read_text(path);
  if (!text) return bad("cannot read");
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object() || j.value("format", 0) != 1 || !j.contains("files") || !j["files"].is_object())
    return bad("expected {\"format\": 1, \"files\": {...}}");
  for (const auto& [name, v] : j["files"].items()) {
    try {
      Entry e;
      e.file = name;
      e.project = v.at("project").get<std::string>();
      e.version = v.at("version").get<std::string>();
      e.sha256 = v.at("sha256").get<std::string>();
      e.size = v.at("size").get<std::uint64_t>();
      e.published_at = v.at("published_at").get<std::string>();
      if (v.contains("gpu")) e.gpu = v["gpu"];
      // The name becomes a path under files/: a manifest must not point outside it.
      if (name.empty() || name.find('/') != std::string::npos || name.front() == '.')
        return bad(fmt::format("file name '{}' is not a plain wheel file name", name));
      // The project becomes a folder under simple/ (pages are written there): only the
      // PEP 503-normalised name of the file's own distribution, never "/abs" or "../..".
      auto wheel_name = validate::parse_wheel_name(name);
      if (!wheel_name) return bad(fmt::format("file name {} is not a wheel file name", text::quoted(name)));
      if (!validate::is_normalized_name(e.project) || e.project != validate::normalize_name(wheel_name->distribution))
        return bad(fmt::format("entry {}: project {} is not {}, the PEP 503-normalised name of its distribution",
                               text::quoted(name), text::quoted(e.project),
                               validate::normalize_name(wheel_name->distribution)));
      m.files.emplace(name, std::move(e));
    } catch (const json::exception& ex) {
      return bad(fmt::format("entry '{}': {}", name, ex.what()));
    }
  }
  return m;
}

Result<std::vector<Published>> publish(const fs::path& dir, const std::vector<fs::path>& wheels,
                                       const arch::ArchData& gpus, const PublishOptions& options) {
  if (wheels.empty()) return Error::bad_input("no wheel to publish");
  struct Incoming {
    fs::path path;
    validate::WheelName name;
    Hashed hash;
    nlohmann::json gpu;  // its device code, read before the mirror is touched (views.hpp)
  };
  // Check every input before touching the mirror.
  std::vector<Incoming> incoming;
  std::map<std::string, std::size_t> by_file;
  for (const auto& w : wheels) {
    auto h = checked_wheel(w);
    if (!h) return h.error();
    auto name = validate::parse_wheel_name(w.filename().string());
    auto file = w.filename().string();
    if (auto it = by_file.find(file); it != by_file.end()) {
      if (incoming[it->second].hash.sha256 != h->sha256)
        return Error::bad_input(fmt::format("{} and {} have the same file name but different contents",
                                            incoming[it->second].path.string(), w.string()));
      continue;
    }
    for (const auto& other : incoming)
      if (identity(other.name) == identity(*name) && other.hash.sha256 != h->sha256)
        return Error::bad_input(fmt::format("{} and {} are one release file for pip (project {}, version {} == {}) "
                                            "with different contents",
                                            other.path.string(), w.string(), validate::normalize_name(name->distribution),
                                            other.name.version, name->version));
    auto gpu = read_gpu_facts(w);
    if (!gpu) return Error::bad_input("publish: wheel " + gpu.error().message);
    by_file[file] = incoming.size();
    incoming.push_back({w, std::move(*name), *h, gpu->to_json()});
  }

  std::error_code ec;
  fs::create_directories(dir / "files", ec);
  if (ec) return Error::bad_input(fmt::format("--mirror {}: cannot create files/ there: {}", text::quoted(dir.string()), ec.message()));
  auto lock = store::FileLock::acquire(dir / ".lock", options.on_wait);
  if (!lock) return lock.error();

  auto manifest = read_manifest(dir);
  if (!manifest) return manifest.error();
  // Every file in files/ counts as published, whatever the manifest says: a lost or stale
  // manifest is completed from them, never a reason to replace one.
  auto adopted = adopt_files(dir, *manifest);
  if (!adopted) return adopted.error();
  bool changed = *adopted > 0;
  // Entries without device-code facts (adopted, or an older archbuild's manifest): read once.
  auto filled = fill_gpu_facts(dir, *manifest);
  if (!filled) return filled.error();
  changed = changed || *filled > 0;
  // Immutability first, for every wheel: a conflict refuses the whole publish.
  for (const auto& in : incoming) {
    auto file = in.path.filename().string();
    if (auto it = manifest->files.find(file); it != manifest->files.end() && it->second.sha256 != in.hash.sha256)
      return Error::not_fine(fmt::format(
          "{}: already published with sha256 {} (this file's is {}); published files are immutable — "
          "publish it under a new version or build number",
          file, it->second.sha256, in.hash.sha256));
    // Spelled otherwise, the same release file: "1.0.0" after "1.0", "My_Pkg" after "my.pkg".
    for (const auto& [other, e] : manifest->files)
      if (other != file && e.sha256 != in.hash.sha256 && identity_of_file(other) == identity(in.name))
        return Error::not_fine(fmt::format(
            "{}: {} is already published as {} (sha256 {}; this file's is {}), and pip reads both names as one "
            "release file (PEP 503 project {}, PEP 440 version {} == {}); published files are immutable — publish it "
            "under a new version or build number",
            file, e.project + " " + e.version, other, e.sha256, in.hash.sha256, e.project, e.version, in.name.version));
    // Something other than a file where a published file lies (a FIFO would block its read).
    if (auto what = not_a_file(dir / "files" / file))
      return Error::not_fine(fmt::format("--mirror {}: {} {}, not a regular file: the mirror is damaged (publish --verify "
                                         "lists it); move it away, then publish again",
                                         text::quoted(dir.string()), text::quoted("files/" + file), *what));
    // The file itself, when the manifest's word for it is wrong (an older manifest put back).
    if (auto on_disk = hash_file(dir / "files" / file); on_disk && on_disk->sha256 != in.hash.sha256)
      return Error::not_fine(fmt::format(
          "{}: files/ holds it with sha256 {} (this file's is {}; manifest.json says otherwise: run publish --verify); "
          "published files are immutable",
          file, on_disk->sha256, in.hash.sha256));
  }

  std::vector<Published> out;
  for (const auto& in : incoming) {
    auto file = in.path.filename().string();
    auto target = dir / "files" / file;
    auto listed = manifest->files.find(file);
    if (listed == manifest->files.end())  // these bytes already published under another spelling
      for (auto it = manifest->files.begin(); it != manifest->files.end(); ++it)
        if (it->second.sha256 == in.hash.sha256 && identity_of_file(it->first) == identity(in.name)) listed = it;
    if (listed != manifest->files.end() && listed->first != file) {
      out.push_back({listed->second, false});
      continue;
    }
    if (listed != manifest->files.end() && fs::exists(fs::symlink_status(target, ec))) {
      out.push_back({listed->second, false});
      continue;
    }
    // Not in files/ (adopt_files took every file there; a listed one lost is put back): written
    // beside it and renamed.
    auto copied = copy_atomic(in.path, target);
    if (!copied) return copied.error();
    if (copied->sha256 != in.hash.sha256)
      return Error::not_fine(fmt::format("{}: changed while being published (sha256 {} then {})", in.path.string(),
                                         in.hash.sha256, copied->sha256));
    if (listed != manifest->files.end()) {
      out.push_back({listed->second, false});
      continue;
    }
    Entry e{file, validate::normalize_name(in.name.distribution), in.name.version, in.hash.sha256, in.hash.size,
            now_utc(), in.gpu};
    manifest->files[file] = e;
    out.push_back({e, true});
    changed = true;
  }
  // The manifest before the pages: a crash between them leaves pages a later publish rewrites.
  if (changed)
    if (auto w = store::write_file_atomic(dir / kManifest, to_json(*manifest).dump(1) + "\n"); !w) return w.error();
  if (auto p = write_pages(dir, *manifest); !p) return p.error();
  // The GPU views of the projects published (and their dependents); all of them after facts were filled.
  std::set<std::string> touched;
  for (const auto& p : out) touched.insert(p.entry.project);
  const bool everything = *filled > 0 || *adopted > 0;
  if (auto v = write_views(dir, *manifest, gpus, everything ? std::set<std::string>{} : dependents_of(*manifest, touched)); !v)
    return v.error();
  // The variant wheels of the projects published (every project's when variants are new here).
  if (options.variants || has_variants(dir))
    if (auto v = write_variants(dir, *manifest, gpus, everything || !has_variants(dir) ? std::set<std::string>{} : touched); !v)
      return v.error();
  return out;
}

Result<VerifyReport> verify(const fs::path& dir, const arch::ArchData& gpus) {
  std::error_code ec;
  if (auto is_dir = paths::expect_directory(dir, "--mirror"); !is_dir) return is_dir.error();
  if (!fs::exists(dir / kManifest, ec))
    return Error::bad_input(fmt::format("--mirror {}: no manifest.json (not a mirror archbuild published to)", text::quoted(dir.string())));
  // A mirror this user cannot write (read-only, or another's) cannot have its lock taken, and
  // cannot be changed by this user's publish either: verified as it is.
  std::optional<store::FileLock> lock;
  if (auto taken = store::FileLock::acquire(dir / ".lock"); taken)
    lock.emplace(std::move(*taken));
  else if (::access(dir.c_str(), W_OK) == 0)
    return taken.error();
  auto manifest = read_manifest(dir);
  if (!manifest) return manifest.error();

  VerifyReport r;
  auto problem = [&](std::string kind, std::string file, std::string detail) {
    r.problems.push_back({std::move(kind), std::move(file), std::move(detail)});
  };

  // The files against the manifest.
  for (const auto& [name, e] : manifest->files) {
    auto p = dir / "files" / name;
    if (auto what = not_a_file(p)) {
      problem("missing-file", name, fmt::format("in manifest.json, but files/ holds something that {}", *what));
      continue;
    }
    if (!fs::is_regular_file(p, ec)) {
      problem("missing-file", name, "in manifest.json but not in files/");
      continue;
    }
    ++r.files_checked;
    auto h = hash_file(p);
    if (!h) {
      problem("missing-file", name, h.error().message);
      continue;
    }
    if (h->sha256 != e.sha256)
      problem("hash-mismatch", name, fmt::format("sha256 {} but manifest.json says {}", h->sha256, e.sha256));
    else if (h->size != e.size)
      problem("size-mismatch", name, fmt::format("{} bytes but manifest.json says {}", h->size, e.size));
  }
  if (fs::is_directory(dir / "files", ec))
    for (const auto& de : fs::directory_iterator(dir / "files", ec)) {
      auto name = de.path().filename().string();
      if (name.rfind('.', 0) == 0) continue;  // a temp file of a publish in progress or killed
      if (!manifest->files.count(name)) problem("extra-file", name, "in files/ but not in manifest.json");
    }

  // One release file for pip under two spellings with other bytes (published before publish
  // keyed files by identity): `pip download` of that version may get either.
  std::map<std::string, const Entry*> first_of;
  for (const auto& [name, e] : manifest->files) {
    auto id = identity_of_file(name);
    if (!id) continue;
    auto [it, fresh] = first_of.emplace(*id, &e);
    if (!fresh && it->second->sha256 != e.sha256)
      problem("duplicate-release", name,
              fmt::format("the same release file as {} for pip (project {}, version {} == {}) with other contents",
                          it->second->file, e.project, it->second->version, e.version));
  }

  // The pages' links against the manifest.
  auto projects = by_project(*manifest);
  for (const auto& [project, entries] : projects) {
    auto page_path = dir / "simple" / project / "index.html";
    auto rel = fs::path("simple") / project / "index.html";
    auto page = read_text(page_path);
    if (!page) {
      problem("page-missing", rel.string(), fmt::format("project {} has no page", project));
      continue;
    }
    ++r.pages_checked;
    std::map<std::string, std::string> links;  // file -> sha256 in the link
    for (std::string href : hrefs(*page)) {
      for (std::string::size_type pos; (pos = href.find("&amp;")) != std::string::npos;) href.replace(pos, 5, "&");
      std::string sha;
      if (auto hash = href.find("#sha256="); hash != std::string::npos) {
        sha = href.substr(hash + 8);
        href.resize(hash);
      }
      auto slash = href.rfind('/');
      links[percent_decode(slash == std::string::npos ? href : href.substr(slash + 1))] = sha;
    }
    for (const auto& e : entries) {
      auto it = links.find(e.file);
      if (it == links.end())
        problem("page-link-missing", rel.string(), fmt::format("no link to {}", e.file));
      else if (it->second != e.sha256)
        problem("page-link-hash", rel.string(),
                fmt::format("{}: link says sha256 {} but manifest.json says {}", e.file,
                            it->second.empty() ? "(none)" : it->second, e.sha256));
      if (it != links.end()) links.erase(it);
    }
    for (const auto& [file, sha] : links)
      problem("page-link-extra", rel.string(), fmt::format("links {} which manifest.json does not list", file));
    // The PEP 691 page, when there is one, must say the same.
    if (auto pj_text = read_text(dir / "simple" / project / "index.json")) {
      ++r.pages_checked;
      auto jrel = (fs::path("simple") / project / "index.json").string();
      json pj = json::parse(*pj_text, nullptr, false);
      std::map<std::string, std::string> jl;
      if (!pj.is_discarded() && pj.contains("files") && pj["files"].is_array())
        for (const auto& f : pj["files"])
          if (f.is_object() && f.contains("filename") && f["filename"].is_string())
            jl[f["filename"].get<std::string>()] =
                f.contains("hashes") && f["hashes"].is_object() ? f["hashes"].value("sha256", "") : "";
      for (const auto& e : entries) {
        auto it = jl.find(e.file);
        if (it == jl.end())
          problem("page-link-missing", jrel, fmt::format("no entry for {}", e.file));
        else if (it->second != e.sha256)
          problem("page-link-hash", jrel, fmt::format("{}: sha256 {} but manifest.json says {}", e.file, it->second, e.sha256));
        if (it != jl.end()) jl.erase(it);
      }
      for (const auto& [file, sha] : jl)
        problem("page-link-extra", jrel, fmt::format("lists {} which manifest.json does not list", file));
    }
  }
  // The root page lists every project.
  if (auto root = read_text(dir / "simple" / "index.html")) {
    ++r.pages_checked;
    std::set<std::string> listed;
    for (std::string href : hrefs(*root)) {
      if (!href.empty() && href.back() == '/') href.pop_back();
      listed.insert(percent_decode(href));
    }
    for (const auto& [project, entries] : projects)
      if (!listed.count(project)) problem("page-link-missing", "simple/index.html", fmt::format("no link to {}/", project));
  } else if (!projects.empty()) {
    problem("page-missing", "simple/index.html", "the root index is missing");
  }
  verify_views(dir, *manifest, gpus, r);
  verify_variants(dir, *manifest, gpus, r);
  return r;
}

json to_json(const VerifyReport& r) {
  json problems = json::array();
  for (const auto& p : r.problems) problems.push_back({{"kind", p.kind}, {"file", p.file}, {"detail", p.detail}});
  return {{"ok", r.ok()}, {"files_checked", r.files_checked}, {"pages_checked", r.pages_checked}, {"problems", problems}};
}

}  // namespace archbuild::mirror
