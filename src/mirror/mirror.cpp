#include "mirror/mirror.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "core/sha256.hpp"
#include "store/atomic_file.hpp"
#include "store/lock.hpp"
#include "validate/wheel_check.hpp"

namespace archbuild::mirror {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kManifest = "manifest.json";

std::string now_utc() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(t));
}

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Pages are rewritten only when their content changes: publishing the same file again leaves
// every page (and its mtime) as it was, and a publish repairs pages a crash left stale.
Result<bool> write_if_changed(const fs::path& p, const std::string& content) {
  if (auto old = read_text(p); old && *old == content) return false;
  auto w = store::write_file_atomic(p, content);
  if (!w) return w.error();
  return true;
}

struct Hashed {
  std::string sha256;
  std::uint64_t size = 0;
};

// Streams `src` into an AtomicFile at `dst` (temp + rename), hashing what is copied.
Result<Hashed> copy_atomic(const fs::path& src, const fs::path& dst) {
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
  return {{"format", 1}, {"files", files}};
}

Result<Manifest> read_manifest(const fs::path& dir) {
  Manifest m;
  auto path = dir / kManifest;
  std::error_code ec;
  if (!fs::exists(path, ec)) return m;
  auto text = read_text(path);
  if (!text) return Error::not_fine(fmt::format("{}: cannot read", path.string()));
  auto bad = [&](const std::string& why) { return Error::not_fine(fmt::format("{}: {}", path.string(), why)); };
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
      // The name becomes a path under files/: a manifest must not point outside it.
      if (name.empty() || name.find('/') != std::string::npos || name.front() == '.')
        return bad(fmt::format("file name '{}' is not a plain wheel file name", name));
      m.files.emplace(name, std::move(e));
    } catch (const json::exception& ex) {
      return bad(fmt::format("entry '{}': {}", name, ex.what()));
    }
  }
  return m;
}

Result<std::vector<Published>> publish(const fs::path& dir, const std::vector<fs::path>& wheels,
                                       const PublishOptions& options) {
  if (wheels.empty()) return Error::bad_input("no wheel to publish");
  struct Incoming {
    fs::path path;
    validate::WheelName name;
    Hashed hash;
  };
  // Check every input before touching the mirror.
  std::vector<Incoming> incoming;
  std::map<std::string, std::size_t> by_file;
  for (const auto& w : wheels) {
    std::error_code ec;
    if (!fs::is_regular_file(w, ec)) return Error::bad_input(fmt::format("{}: no such wheel file", w.string()));
    auto name = validate::parse_wheel_name(w.filename().string());
    if (!name) return Error::bad_input(fmt::format("{}: {}", w.string(), name.error().message));
    auto h = hash_file(w);
    if (!h) return h.error();
    auto file = w.filename().string();
    if (auto it = by_file.find(file); it != by_file.end()) {
      if (incoming[it->second].hash.sha256 != h->sha256)
        return Error::bad_input(fmt::format("{} and {} have the same file name but different contents",
                                            incoming[it->second].path.string(), w.string()));
      continue;
    }
    by_file[file] = incoming.size();
    incoming.push_back({w, std::move(*name), *h});
  }

  std::error_code ec;
  fs::create_directories(dir / "files", ec);
  if (ec) return Error::bad_input(fmt::format("--mirror {}: {}", dir.string(), ec.message()));
  auto lock = store::FileLock::acquire(dir / ".lock", options.on_wait);
  if (!lock) return lock.error();

  auto manifest = read_manifest(dir);
  if (!manifest) return manifest.error();
  // Immutability first, for every wheel: a conflict refuses the whole publish.
  for (const auto& in : incoming) {
    auto file = in.path.filename().string();
    if (auto it = manifest->files.find(file); it != manifest->files.end() && it->second.sha256 != in.hash.sha256)
      return Error::not_fine(fmt::format(
          "{}: already published with sha256 {} (this file's is {}); published files are immutable — "
          "publish it under a new version or build number",
          file, it->second.sha256, in.hash.sha256));
  }

  std::vector<Published> out;
  bool changed = false;
  for (const auto& in : incoming) {
    auto file = in.path.filename().string();
    if (auto it = manifest->files.find(file); it != manifest->files.end()) {
      out.push_back({it->second, false});
      continue;
    }
    auto target = dir / "files" / file;
    // A file here without a manifest entry was left by a publish that died before its manifest:
    // never published, so it is replaced (or kept when it is this very file).
    std::optional<Hashed> have;
    if (fs::exists(target, ec))
      if (auto h = hash_file(target); h && h->sha256 == in.hash.sha256) have = *h;
    if (!have) {
      auto copied = copy_atomic(in.path, target);
      if (!copied) return copied.error();
      if (copied->sha256 != in.hash.sha256)
        return Error::not_fine(fmt::format("{}: changed while being published (sha256 {} then {})", in.path.string(),
                                           in.hash.sha256, copied->sha256));
    }
    Entry e{file, validate::normalize_name(in.name.distribution), in.name.version, in.hash.sha256, in.hash.size,
            now_utc()};
    manifest->files[file] = e;
    out.push_back({e, true});
    changed = true;
  }
  // The manifest before the pages: a crash between them leaves pages a later publish rewrites.
  if (changed)
    if (auto w = store::write_file_atomic(dir / kManifest, to_json(*manifest).dump(1) + "\n"); !w) return w.error();
  if (auto p = write_pages(dir, *manifest); !p) return p.error();
  return out;
}

Result<VerifyReport> verify(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Error::bad_input(fmt::format("--mirror {}: no such directory", dir.string()));
  if (!fs::exists(dir / kManifest, ec))
    return Error::bad_input(fmt::format("--mirror {}: no manifest.json (not a mirror archbuild published to)", dir.string()));
  auto lock = store::FileLock::acquire(dir / ".lock");
  if (!lock) return lock.error();
  auto manifest = read_manifest(dir);
  if (!manifest) return manifest.error();

  VerifyReport r;
  auto problem = [&](std::string kind, std::string file, std::string detail) {
    r.problems.push_back({std::move(kind), std::move(file), std::move(detail)});
  };

  // The files against the manifest.
  for (const auto& [name, e] : manifest->files) {
    auto p = dir / "files" / name;
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

  // The pages' links against the manifest.
  static const std::regex link(R"re(<a href="([^"]*)")re");
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
    for (std::sregex_iterator it(page->begin(), page->end(), link), end; it != end; ++it) {
      std::string href = (*it)[1];
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
    for (std::sregex_iterator it(root->begin(), root->end(), link), end; it != end; ++it) {
      std::string href = (*it)[1];
      if (!href.empty() && href.back() == '/') href.pop_back();
      listed.insert(percent_decode(href));
    }
    for (const auto& [project, entries] : projects)
      if (!listed.count(project)) problem("page-link-missing", "simple/index.html", fmt::format("no link to {}/", project));
  } else if (!projects.empty()) {
    problem("page-missing", "simple/index.html", "the root index is missing");
  }
  return r;
}

json to_json(const VerifyReport& r) {
  json problems = json::array();
  for (const auto& p : r.problems) problems.push_back({{"kind", p.kind}, {"file", p.file}, {"detail", p.detail}});
  return {{"ok", r.ok()}, {"files_checked", r.files_checked}, {"pages_checked", r.pages_checked}, {"problems", problems}};
}

}  // namespace archbuild::mirror
