#include "arch/arch_data.hpp"

#include <algorithm>
#include <charconv>
#include <mutex>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/text.hpp"
#include "core/toml_load.hpp"

namespace archbuild::arch {

namespace {

std::optional<Cc> parse_dotted(std::string_view s) {
  auto dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 2 != s.size()) return std::nullopt;
  int major = 0, minor = 0;
  auto r1 = std::from_chars(s.data(), s.data() + dot, major);
  auto r2 = std::from_chars(s.data() + dot + 1, s.data() + s.size(), minor);
  if (r1.ec != std::errc() || r1.ptr != s.data() + dot || r2.ec != std::errc() ||
      r2.ptr != s.data() + s.size())
    return std::nullopt;
  return Cc{major, minor};
}

// "8.0;8.6+PTX" (only the plain X.Y[+PTX] form is used in the data file).
Result<std::vector<Arch>> parse_simple_list(const std::string& list, const std::string& where) {
  std::vector<Arch> out;
  for (const auto& item : text::split_any(list, "; ")) {
    std::string_view v = item;
    bool ptx = false;
    if (v.size() > 4 && v.substr(v.size() - 4) == "+PTX") {
      ptx = true;
      v.remove_suffix(4);
    }
    auto cc = parse_dotted(v);
    if (!cc) return Error::bad_input(fmt::format("{}: '{}' is not a compute capability X.Y", where, item));
    out.push_back({*cc, Variant::none, true, ptx, std::nullopt});
  }
  return out;
}

}  // namespace

std::string normalize_gpu_name(std::string_view name) {
  std::vector<std::string> words = text::split_any(text::lower(name), " \t");
  static const std::vector<std::string> prefixes = {"nvidia", "geforce", "tesla", "quadro"};
  while (!words.empty() &&
         std::find(prefixes.begin(), prefixes.end(), words.front()) != prefixes.end())
    words.erase(words.begin());
  return text::join(words, " ");
}

Result<ArchData> ArchData::load(const std::filesystem::path& path) {
  auto parsed = tomlx::parse_file(path);
  if (!parsed) return parsed.error();
  const toml::table& root = *parsed;
  const std::string file = path.string();
  ArchData data;
  try {
    tomlx::TableReader top(root, file, "gpus.toml");
    const toml::array* ccs = top.array("cc", true);
    const toml::array* names = top.array("name", true);
    const toml::array* gpus = top.array("gpu", true);
    if (auto e = top.finish()) return *e;

    auto table_of = [&](const toml::node& n, const char* what) -> const toml::table& {
      if (const auto* t = n.as_table()) return *t;
      throw Failure(Error::bad_input(fmt::format("{}: each {} entry must be a table", tomlx::where(n, file), what)));
    };
    auto cc_of = [&](tomlx::TableReader& r, const char* key) -> Cc {
      auto s = r.string(key, true);
      r.raise_if_failed();
      auto cc = parse_dotted(*s);
      if (!cc) throw Failure(r.error_at(key, fmt::format("'{}' is not a compute capability like 9.0", *s)));
      return *cc;
    };

    for (const auto& n : *ccs) {
      tomlx::TableReader r(table_of(n, "cc"), file, "[[cc]]");
      KnownCc k;
      k.cc = cc_of(r, "cc");
      k.architecture = r.string("architecture", true).value_or("");
      for (const auto& v : r.strings("variants").value_or(std::vector<std::string>{})) {
        if (v == "a") k.variants.push_back(Variant::a);
        else if (v == "f") k.variants.push_back(Variant::f);
        else throw Failure(r.error_at("variants", fmt::format("unknown variant '{}'; valid: a, f", v)));
      }
      if (r.node("renamed_to")) k.renamed_to = cc_of(r, "renamed_to");
      if (auto e = r.finish()) return *e;
      data.ccs_.push_back(std::move(k));
    }
    std::sort(data.ccs_.begin(), data.ccs_.end(), [](const auto& a, const auto& b) { return a.cc < b.cc; });

    for (const auto& n : *names) {
      tomlx::TableReader r(table_of(n, "name"), file, "[[name]]");
      ArchName an;
      an.name = r.string("name", true).value_or("");
      auto build = r.string("build", true);
      auto build_ptx = r.string("build_ptx");
      auto ext = r.string("extension");
      auto min_cuda = r.string("min_cuda");
      if (auto e = r.finish()) return *e;
      std::string where = tomlx::where(n, file);
      auto b = parse_simple_list(*build, where);
      if (!b) return b.error();
      for (const auto& a : *b) an.build.push_back(a.cc);
      if (build_ptx) {
        auto bp = parse_simple_list(*build_ptx, where);
        if (!bp) return bp.error();
        for (const auto& a : *bp) an.build_ptx.push_back(a.cc);
      }
      if (ext) {
        auto x = parse_simple_list(*ext, where);
        if (!x) return x.error();
        an.extension = *x;
      }
      if (min_cuda) {
        an.min_cuda = Version::parse(*min_cuda);
        if (!an.min_cuda || an.min_cuda->size() != 2)
          return Error::bad_input(fmt::format("{}: min_cuda \"{}\" is not a CUDA version like 13.4", where, *min_cuda));
      }
      data.names_.push_back(std::move(an));
    }

    for (const auto& n : *gpus) {
      tomlx::TableReader r(table_of(n, "gpu"), file, "gpu entry");
      Gpu g;
      g.name = r.string("name", true).value_or("");
      g.cc = cc_of(r, "cc");
      g.aliases = r.strings("aliases").value_or(std::vector<std::string>{});
      g.smi = r.strings("smi").value_or(std::vector<std::string>{});
      g.platform = r.string("platform").value_or("");
      if (auto e = r.finish()) return *e;
      data.gpus_.push_back(std::move(g));
    }
  } catch (const Failure& f) {
    return f.error;
  }

  // Every CC an expansion or a GPU names must exist: the data file checks itself.
  auto check = [&](Cc cc, const std::string& who) -> std::optional<Error> {
    if (data.find(cc)) return std::nullopt;
    return Error::bad_input(fmt::format("{}: {} names CC {}, which no [[cc]] entry defines", file, who, cc.str()));
  };
  for (const auto& an : data.names_) {
    for (Cc c : an.build) if (auto e = check(c, an.name)) return *e;
    for (const auto& a : an.extension) if (auto e = check(a.cc, an.name)) return *e;
  }
  for (const auto& g : data.gpus_)
    if (auto e = check(g.cc, g.name)) return *e;
  return data;
}

const ArchData& ArchData::shipped() {
  static std::once_flag once;
  static std::optional<ArchData> data;
  static std::optional<Error> error;
  std::call_once(once, [] {
    auto r = load(data_root() / "data" / "gpus.toml");
    if (r) data = std::move(r).value();
    else error = r.error();
  });
  if (error) throw Failure(*error);
  return *data;
}

const KnownCc* ArchData::find(Cc cc) const {
  for (const auto& k : ccs_)
    if (k.cc == cc) return &k;
  return nullptr;
}

const ArchName* ArchData::find_name(std::string_view name) const {
  for (const auto& n : names_)
    if (text::equals_icase(n.name, name)) return &n;
  return nullptr;
}

std::string ArchData::architecture(Cc cc) const {
  const KnownCc* k = find(cc);
  return k ? k->architecture : "unknown";
}

std::vector<const Gpu*> ArchData::match_gpus(std::string_view query) const {
  const std::string q = normalize_gpu_name(query);
  std::vector<const Gpu*> exact, partial;
  if (q.empty()) return {};
  for (const auto& g : gpus_) {
    bool is_exact = false, is_partial = false;
    auto consider = [&](const std::string& name) {
      std::string n = normalize_gpu_name(name);
      if (n == q) is_exact = true;
      else if (n.find(q) != std::string::npos) is_partial = true;
    };
    consider(g.name);
    for (const auto& a : g.aliases) consider(a);
    for (const auto& s : g.smi) consider(s);
    if (is_exact) exact.push_back(&g);
    else if (is_partial) partial.push_back(&g);
  }
  if (!exact.empty()) return exact;
  if (!partial.empty()) return partial;
  // A name nvidia-smi prints around a known one ("NVIDIA GeForce RTX 4090 Laptop GPU"): the
  // longest known name it contains word-wise, as detection reads it.
  if (const Gpu* g = identify(query)) return {g};
  return {};
}

const Gpu* ArchData::identify(std::string_view device_name) const {
  const std::string d = normalize_gpu_name(device_name);
  // Exact names first, then the longest known name contained word-wise in the device name
  // ("h100 80gb hbm3" contains "h100").
  const Gpu* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& g : gpus_) {
    std::vector<std::string> all = {g.name};
    all.insert(all.end(), g.aliases.begin(), g.aliases.end());
    all.insert(all.end(), g.smi.begin(), g.smi.end());
    for (const auto& name : all) {
      std::string n = normalize_gpu_name(name);
      if (n == d) return &g;
      std::string padded = " " + d + " ", needle = " " + n + " ";
      if (padded.find(needle) != std::string::npos && n.size() > best_len) {
        best = &g;
        best_len = n.size();
      }
    }
  }
  return best;
}

std::vector<std::string> ArchData::nearest_gpu_names(std::string_view query, std::size_t limit) const {
  std::vector<std::string> names;
  for (const auto& g : gpus_) {
    names.push_back(g.name);
    names.insert(names.end(), g.aliases.begin(), g.aliases.end());
  }
  std::string q = normalize_gpu_name(query);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& n : names) scored.emplace_back(text::edit_distance(q, normalize_gpu_name(n)), n);
  std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [d, n] : scored) {
    if (out.size() >= limit) break;
    out.push_back(n);
  }
  return out;
}

}  // namespace archbuild::arch
