#include "arch/parse.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::arch {

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

int to_int(std::string_view s) {
  int v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

bool ends_with_icase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && text::equals_icase(s.substr(s.size() - suffix.size()), suffix);
}

class Parser {
 public:
  Parser(const ArchData& data, const ParseOptions& options) : data_(data), options_(options) {}

  Result<std::vector<Arch>> parse(std::string_view text) {
    std::vector<std::string> tokens = text::split_any(text, " \t\r\n;");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string& t = tokens[i];
      std::string lt = text::lower(t);
      // nvcc: -gencode SPEC, -gencode=SPEC, --generate-code …, a bare arch=…,code=… spec.
      if (lt == "-gencode" || lt == "--generate-code") {
        if (i + 1 >= tokens.size())
          return fail(t, fmt::format("{} needs a value like arch=compute_90,code=sm_90", text::quoted(t)));
        if (auto e = gencode(tokens[++i])) return *e;
        continue;
      }
      if (auto v = after_prefix(t, {"-gencode=", "--generate-code="})) {
        if (auto e = gencode(*v)) return *e;
        continue;
      }
      if (text::starts_with_icase(t, "arch=") || text::starts_with_icase(t, "code=")) {
        if (auto e = gencode(t)) return *e;
        continue;
      }
      // nvcc: -arch=sm_90 means SASS and PTX for 90; -arch=compute_90 PTX only.
      if (lt == "-arch" || lt == "--gpu-architecture") {
        if (i + 1 >= tokens.size()) return fail(t, fmt::format("{} needs a value like sm_90", text::quoted(t)));
        if (auto e = nvcc_arch(tokens[++i])) return *e;
        continue;
      }
      if (auto v = after_prefix(t, {"-arch=", "--gpu-architecture="})) {
        if (auto e = nvcc_arch(*v)) return *e;
        continue;
      }
      // Spack cuda_arch=80,90 and EasyBuild cuda_compute_capabilities=8.0,9.0.
      std::string_view body = t;
      if (auto v = after_prefix(t, {"cuda_arch=", "cuda_compute_capabilities="})) body = *v;
      for (const auto& item : text::split_any(body, ",")) {
        if (auto e = item_(item)) return *e;
      }
    }
    if (out_.empty())
      return Error::bad_input(
          "empty architecture list: give at least one, e.g. 9.0 (an empty TORCH_CUDA_ARCH_LIST "
          "makes PyTorch build for whatever GPU the build host has)");
    return normalize(std::move(out_));
  }

 private:
  static std::optional<std::string> after_prefix(std::string_view t, std::initializer_list<std::string_view> prefixes) {
    for (auto p : prefixes)
      if (text::starts_with_icase(t, p)) return std::string(t.substr(p.size()));
    return std::nullopt;
  }

  Error fail(std::string_view token, const std::string& why) {
    // What the user typed, quoted, escaped and cut (a 100 KB argument gives a short line).
    return Error::bad_input(fmt::format("invalid architecture {}: {}", text::quoted(token), why));
  }

  // Nearest existing CCs by distance in SM number: 9.5 -> 9.0, 10.0.
  std::string nearest_ccs(Cc cc, Variant v = Variant::none) const {
    std::vector<std::pair<int, std::string>> scored;
    for (const auto& k : data_.ccs())
      if (v == Variant::none || std::count(k.variants.begin(), k.variants.end(), v))
        scored.emplace_back(std::abs(k.cc.sm() - cc.sm()), k.cc.str() + std::string(suffix(v)));
    std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<std::string> best;
    for (const auto& [d, s] : scored) {
      if (best.size() >= 2) break;
      best.push_back(s);
    }
    return text::join(best, ", ");
  }

  // Every CC the data gives this variant: 9.0a, 10.0a, … 12.1a.
  std::string with_variant(Variant v) const {
    std::vector<std::string> all;
    for (const auto& k : data_.ccs())
      if (std::count(k.variants.begin(), k.variants.end(), v)) all.push_back(k.cc.str() + std::string(suffix(v)));
    return text::join(all, ", ");
  }

  std::optional<Error> check(std::string_view token, Cc cc, Variant v) {
    const KnownCc* k = data_.find(cc);
    // Said as what archbuild knows, not what exists: older CCs (3.0, 2.1) existed, and a newer
    // one may come before data/gpus.toml lists it.
    if (!k)
      return fail(token, fmt::format("archbuild knows no compute capability {}{}: data/gpus.toml lists {} to {}; "
                                     "nearest: {}",
                                     cc.str(), cc.major > 0 ? fmt::format(" (sm_{})", cc.sm()) : "",
                                     data_.ccs().front().cc.str(), data_.ccs().back().cc.str(), nearest_ccs(cc)));
    if (v != Variant::none) {
      if (options_.grammar == Grammar::extension && v == Variant::f)
        return fail(token, "torch.utils.cpp_extension does not accept 'f' suffixes; use the plain "
                           "CC (e.g. 12.0) or the build grammar (--parser build)");
      if (!std::count(k->variants.begin(), k->variants.end(), v))
        return fail(token, fmt::format("{} has no '{}' variant; it exists for {}", cc.str(), suffix(v),
                                       with_variant(v)));
    }
    return std::nullopt;
  }

  std::optional<Error> add(std::string_view token, Arch a) {
    if (auto e = check(token, a.cc, a.variant)) return e;
    if (a.sass_from) {
      if (auto e = check(token, *a.sass_from, Variant::none)) return e;
      if (*a.sass_from > a.cc)
        return fail(token, fmt::format("SASS for {} cannot be built from the newer compute_{}",
                                       a.cc.str(), a.sass_from->sm()));
      if (*a.sass_from == a.cc) a.sass_from.reset();
    }
    out_.push_back(a);
    return std::nullopt;
  }

  // "90", "120", "90a", "100f" -> CC and variant. Empty optional when not of that shape.
  std::optional<std::pair<Cc, Variant>> sm_number(std::string_view s, std::string_view token,
                                                   std::optional<Error>& err) {
    Variant v = Variant::none;
    if (!s.empty() && (s.back() == 'a' || s.back() == 'f' || s.back() == 'A' || s.back() == 'F')) {
      v = (std::tolower(static_cast<unsigned char>(s.back())) == 'a') ? Variant::a : Variant::f;
      s.remove_suffix(1);
    }
    if (!all_digits(s)) return std::nullopt;
    if (s.size() < 2 || s.size() > 3) {
      std::string guess = s.size() == 1 ? fmt::format("{}0", s) : std::string(s.substr(0, 3));
      err = fail(token, fmt::format("an SM number has two or three digits, major then minor "
                                    "(e.g. {}: CC {}.{})", guess, guess.substr(0, guess.size() - 1),
                                    guess.back()));
      return std::nullopt;
    }
    int n = to_int(s);
    return std::pair{Cc::from_sm(n), v};
  }

  std::optional<Error> keyword(std::string_view token, std::string_view kw) {
    if (options_.keyword) {
      auto r = options_.keyword(kw);
      if (!r) return r.error();
      out_.insert(out_.end(), r->begin(), r->end());
      return std::nullopt;
    }
    std::string k = text::lower(kw);
    if (k == "native" || k == "auto")
      return fail(token, "it means the GPUs of this machine, which this command cannot see: run "
                         "`archbuild detect` to list them with their CC, then pass it (e.g. 9.0)");
    return fail(token, "its meaning depends on the CUDA toolkit that builds; list the archs (e.g. "
                       "8.0;9.0) or let `archbuild resolve --sm …` pick a toolkit");
  }

  std::optional<Error> item_(const std::string& token) {
    std::string_view s = token;
    bool ptx = false;
    if (ends_with_icase(s, "+PTX")) {
      ptx = true;
      s.remove_suffix(4);
      if (s.empty()) return fail(token, "+PTX must follow an arch, e.g. 9.0+PTX");
    }
    std::string ls = text::lower(s);
    if (ls == "all" || ls == "all-major" || ls == "common" || ls == "auto" || ls == "native")
      return keyword(token, s);

    std::optional<Error> err;
    // nvcc spellings: sm_90 (SASS), compute_90 (PTX).
    if (text::starts_with_icase(s, "sm_") || text::starts_with_icase(s, "compute_")) {
      bool is_sm = text::starts_with_icase(s, "sm_");
      auto n = sm_number(s.substr(is_sm ? 3 : 8), token, err);
      if (err) return err;
      if (!n) return fail(token, "expected sm_XY or compute_XY with an optional a/f suffix, e.g. sm_90a");
      return add(token, {n->first, n->second, is_sm, !is_sm || ptx, std::nullopt});
    }
    // CMake spellings: 90, 90-real, 90-virtual, 90a.
    if (!s.empty() && std::isdigit(static_cast<unsigned char>(s.front())) && s.find('.') == std::string_view::npos) {
      std::string_view num = s;
      int kind = 0;  // 0 plain, 1 real, 2 virtual
      if (ends_with_icase(num, "-real")) { kind = 1; num.remove_suffix(5); }
      else if (ends_with_icase(num, "-virtual")) { kind = 2; num.remove_suffix(8); }
      auto n = sm_number(num, token, err);
      if (err) return err;
      if (!n)
        return fail(token, "expected a CC like 9.0, an SM number like 90, or a name like Hopper");
      bool sass = kind != 2;
      bool want_ptx = kind == 2 || ptx || (kind == 0 && options_.grammar == Grammar::cmake);
      return add(token, {n->first, n->second, sass, want_ptx, std::nullopt});
    }
    // TORCH_CUDA_ARCH_LIST: X.Y, X.Ya, X.Yf, A(B).
    if (!s.empty() && std::isdigit(static_cast<unsigned char>(s.front()))) {
      std::string_view main = s, from;
      if (auto open = s.find('('); open != std::string_view::npos) {
        if (s.back() != ')') return fail(token, "expected A(B), e.g. 8.6(8.0)");
        if (options_.grammar == Grammar::extension)
          return fail(token, "torch.utils.cpp_extension does not accept the A(B) form; use --parser build");
        main = s.substr(0, open);
        from = s.substr(open + 1, s.size() - open - 2);
        // "8.6()" names no SASS source: a typo, not 8.6.
        if (from.empty()) return fail(token, "expected A(B) with B a CC like 8.0, e.g. 8.6(8.0)");
      }
      auto dotted = [&](std::string_view v) -> std::optional<std::pair<Cc, Variant>> {
        Variant var = Variant::none;
        if (!v.empty() && (v.back() == 'a' || v.back() == 'f')) {
          var = v.back() == 'a' ? Variant::a : Variant::f;
          v.remove_suffix(1);
        }
        auto dot = v.find('.');
        if (dot == std::string_view::npos || !all_digits(v.substr(0, dot)) || v.substr(dot + 1).size() != 1 ||
            !all_digits(v.substr(dot + 1)))
          return std::nullopt;
        return std::pair{Cc{to_int(v.substr(0, dot)), to_int(v.substr(dot + 1))}, var};
      };
      auto m = dotted(main);
      if (!m) return fail(token, "expected a CC like 9.0, 9.0a, 12.0f or 9.0+PTX");
      Arch a{m->first, m->second, true, ptx, std::nullopt};
      if (!from.empty()) {
        auto f = dotted(from);
        if (!f || f->second != Variant::none) return fail(token, "expected A(B) with B a CC like 8.0");
        a.sass_from = f->first;
      }
      return add(token, a);
    }
    // PyTorch names: Ampere, Hopper+PTX, Kepler+Tesla …
    if (const ArchName* name = data_.find_name(s)) {
      if (auto e = name_gate(token, *name)) return e;
      if (options_.grammar == Grammar::extension) {
        for (Arch a : name->extension) out_.push_back(a);  // already carries its PTX
        return std::nullopt;
      }
      for (Cc c : name->build) out_.push_back({c, Variant::none, true, false, std::nullopt});
      if (ptx)
        for (Cc c : name->build_ptx) out_.push_back({c, Variant::none, false, true, std::nullopt});
      return std::nullopt;
    }
    std::vector<std::string> names;
    for (const auto& n : data_.names()) names.push_back(n.name);
    auto near = text::nearest(s, names, 2);
    if (!near.empty()) return fail(token, fmt::format("unknown architecture name; did you mean {}?", text::join(near, " or ")));
    return fail(token, fmt::format("not a CC (9.0), SM (sm_90, 90-real), nvcc flag or name ({})",
                                   text::join(names, ", ")));
  }

  // A name exists only in some readers and from some CUDA on (gpus.toml says which).
  std::optional<Error> name_gate(std::string_view token, const ArchName& name) {
    std::string numbers;
    for (Cc c : name.build) numbers += (numbers.empty() ? "" : ";") + c.str();
    if (options_.grammar == Grammar::extension && name.extension.empty())
      return fail(token, fmt::format("torch.utils.cpp_extension has no name {}; write {} instead",
                                     name.name, numbers));
    if (name.min_cuda && options_.cuda && *options_.cuda < *name.min_cuda)
      return fail(token, fmt::format("PyTorch's parser knows {} only with CUDA >= {} (this list is for CUDA "
                                     "{}); use CUDA >= {}",
                                     name.name, name.min_cuda->str(), options_.cuda->str(), name.min_cuda->str()));
    return std::nullopt;
  }

  std::optional<Error> nvcc_arch(const std::string& value) {
    std::string lv = text::lower(value);
    if (lv == "native" || lv == "all" || lv == "all-major") return keyword(value, value);
    std::optional<Error> err;
    bool is_sm = text::starts_with_icase(value, "sm_");
    if (!is_sm && !text::starts_with_icase(value, "compute_"))
      return fail(value, "-arch expects sm_XY or compute_XY");
    auto n = sm_number(std::string_view(value).substr(is_sm ? 3 : 8), value, err);
    if (err) return err;
    if (!n) return fail(value, "-arch expects sm_XY or compute_XY");
    return add(value, {n->first, n->second, is_sm, true, std::nullopt});
  }

  // arch=compute_80,code=[sm_86,compute_80]
  std::optional<Error> gencode(const std::string& spec) {
    std::string arch_v, code_v;
    std::string cur;
    int depth = 0;
    std::vector<std::string> parts;
    bool in_quotes = false;
    for (char c : spec) {
      if (c == '"') { in_quotes = !in_quotes; continue; }
      if (c == '[') { ++depth; continue; }
      if (c == ']') {
        if (--depth < 0) return fail(spec, "a ']' without its '['");
        continue;
      }
      if (c == ',' && depth == 0 && !in_quotes) { parts.push_back(cur); cur.clear(); continue; }
      cur += c;
    }
    // nvcc refuses an unbalanced list; reading it anyway would guess what was meant.
    if (depth > 0) return fail(spec, "a '[' without its ']' (code=[sm_90,compute_90])");
    if (in_quotes) return fail(spec, "a '\"' without its closing '\"'");
    parts.push_back(cur);
    std::vector<std::string> codes;
    bool in_code = false;
    for (const auto& p : parts) {
      if (text::starts_with_icase(p, "arch=")) { arch_v = p.substr(5); in_code = false; }
      else if (text::starts_with_icase(p, "code=")) {
        for (auto& c : text::split_any(p.substr(5), ",")) codes.push_back(c);
        in_code = true;
      } else if (in_code) codes.push_back(p);
      else return fail(spec, "expected arch=compute_XY,code=sm_XY");
    }
    if (arch_v.empty() || codes.empty())
      return fail(spec, "a -gencode value needs both arch= and code=, e.g. arch=compute_90,code=sm_90");
    std::optional<Error> err;
    if (!text::starts_with_icase(arch_v, "compute_"))
      return fail(spec, fmt::format("arch= must name a virtual arch like compute_90, not {}", text::quoted(arch_v)));
    auto virt = sm_number(std::string_view(arch_v).substr(8), spec, err);
    if (err) return err;
    if (!virt) return fail(spec, "arch= must name a virtual arch like compute_90");
    for (const auto& code : codes) {
      bool is_sm = text::starts_with_icase(code, "sm_");
      if (!is_sm && !text::starts_with_icase(code, "compute_"))
        return fail(spec, fmt::format("code= entries are sm_XY or compute_XY, not {}", text::quoted(code)));
      auto n = sm_number(std::string_view(code).substr(is_sm ? 3 : 8), spec, err);
      if (err) return err;
      if (!n) return fail(spec, fmt::format("code= entries are sm_XY or compute_XY, not {}", text::quoted(code)));
      if (is_sm) {
        Arch a{n->first, n->second, true, false, std::nullopt};
        if (virt->first != n->first) a.sass_from = virt->first;
        if (auto e = add(spec, a)) return e;
      } else {
        if (n->first != virt->first)
          return fail(spec, fmt::format("PTX code {} must match arch={}", code, arch_v));
        if (auto e = add(spec, {n->first, n->second, false, true, std::nullopt})) return e;
      }
    }
    return std::nullopt;
  }

  const ArchData& data_;
  const ParseOptions& options_;
  std::vector<Arch> out_;
};

}  // namespace

Result<std::vector<Arch>> parse_arch_list(std::string_view text, const ArchData& data,
                                          const ParseOptions& options) {
  Parser p(data, options);
  return p.parse(text);
}

Result<std::vector<Arch>> parse_arch_lists(const std::vector<std::string>& texts,
                                           const ArchData& data, const ParseOptions& options) {
  std::string joined;
  for (const auto& t : texts) joined += t + ";";
  return parse_arch_list(joined, data, options);
}

}  // namespace archbuild::arch
