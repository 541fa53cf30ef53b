#include "plan/libraries.hpp"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::plan {

using nlohmann::json;

std::string_view to_string(LibraryState s) {
  switch (s) {
    case LibraryState::found: return "found";
    case LibraryState::missing: return "missing";
    case LibraryState::source: return "source";
    case LibraryState::absent: return "absent";
    case LibraryState::without: return "without";
    case LibraryState::off: return "off";
  }
  return "?";
}

std::optional<bool> cmake_truth(std::string v) {
  v = text::trim(v);
  for (auto& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (v == "ON" || v == "1" || v == "TRUE" || v == "YES" || v == "Y") return true;
  if (v.empty() || v == "OFF" || v == "0" || v == "FALSE" || v == "NO" || v == "N" || v == "IGNORE" ||
      v == "NOTFOUND" || v.ends_with("-NOTFOUND"))
    return false;
  return std::nullopt;
}

namespace {

// The specs a requirement name stands for: the one of that name, else every one providing it.
std::vector<const recipe::LibrarySpec*> providers(const std::vector<recipe::LibrarySpec>& specs, const std::string& name) {
  std::vector<const recipe::LibrarySpec*> out;
  for (const auto& s : specs)
    if (s.name == name) return {&s};
  for (const auto& s : specs)
    if (s.provides == name) out.push_back(&s);
  return out;
}

std::vector<std::string> known_names(const std::vector<recipe::LibrarySpec>& specs) {
  std::set<std::string> names;
  for (const auto& s : specs) {
    names.insert(s.name);
    if (!s.provides.empty()) names.insert(s.provides);
  }
  return {names.begin(), names.end()};
}

std::string fill(std::string tmpl, const LibraryCandidate& c) {
  auto replace = [&](const std::string& what, const std::string& with) {
    for (auto at = tmpl.find(what); at != std::string::npos; at = tmpl.find(what, at + with.size()))
      tmpl.replace(at, what.size(), with);
  };
  replace("{root}", c.root.string());
  replace("{lib_dir}", c.lib_dir.string());
  replace("{include_dir}", c.include_dir.string());
  return tmpl;
}

// Switched off by the recipe or --env: its USE_* reads false, or one of its `off` values is set.
std::optional<std::string> switched_off(const recipe::LibrarySpec& s, const LibraryInputs& in) {
  auto from = [&](const std::string& k) {
    auto it = in.fixed_from.find(k);
    return it == in.fixed_from.end() ? std::string("the recipe's [build.env]") : it->second;
  };
  if (!s.switch_env.empty())
    if (auto it = in.fixed_env.find(s.switch_env); it != in.fixed_env.end() && cmake_truth(it->second) == false)
      return fmt::format("{}={} from {}", it->first, it->second, from(it->first));
  for (const auto& [k, v] : s.off)
    if (auto it = in.fixed_env.find(k); it != in.fixed_env.end() && it->second == v)
      return fmt::format("{}={} from {}", k, v, from(k));
  return std::nullopt;
}

// The host's copy declined by the recipe or --env: a variable the library sets when found (its
// `on`, USE_SYSTEM_NCCL=1) fixed to another value (USE_SYSTEM_NCCL=0) — the build then uses
// its own copy, and the plan must not point it at the host's nor say it was found there.
std::optional<std::string> host_declined(const recipe::LibrarySpec& s, const LibraryInputs& in) {
  for (const auto& [k, v] : s.on) {
    auto it = in.fixed_env.find(k);
    if (it == in.fixed_env.end()) continue;
    auto want = cmake_truth(v), have = cmake_truth(it->second);
    if (want && have ? *want != *have : it->second != v) {
      auto from = in.fixed_from.find(k);
      return fmt::format("{}={} from {}", k, it->second,
                         from == in.fixed_from.end() ? std::string("the recipe's [build.env]") : from->second);
    }
  }
  return std::nullopt;
}

// The provider whose `on` variables all hold the given values (BLAS=NVPL selects nvpl); nullptr
// when none does. `skip`: variables that do not count (fixed elsewhere).
const recipe::LibrarySpec* selected_by(const std::vector<const recipe::LibrarySpec*>& specs,
                                       const std::map<std::string, std::string>& env,
                                       const std::map<std::string, std::string>& skip = {}) {
  for (const auto* s : specs) {
    if (s->on.empty() || specs.size() < 2) continue;
    bool all = std::all_of(s->on.begin(), s->on.end(), [&](const auto& kv) {
      auto it = env.find(kv.first);
      return it != env.end() && it->second == kv.second && !skip.count(kv.first);
    });
    if (all) return s;
  }
  return nullptr;
}

std::string assignments(const std::map<std::string, std::string>& on) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : on) parts.push_back(k + "=" + v);
  return text::join(parts, " ");
}

}  // namespace

Result<LibraryPlan> plan_libraries(const LibraryInputs& in) {
  LibraryPlan out;
  const auto known = known_names(in.specs);
  auto check_name = [&](const std::string& n, const std::string& where) -> std::optional<Error> {
    if (std::find(known.begin(), known.end(), n) != known.end()) return std::nullopt;
    auto near = text::nearest(n, known, 1);
    return Error::bad_input(fmt::format("{}: '{}' is not a library archbuild knows{}; valid: {}", where, n,
                                        near.empty() ? "" : " (did you mean '" + near[0] + "'?)", text::join(known, ", ")));
  };
  for (const auto& w : in.without)
    if (auto e = check_name(w, "--without")) return *e;
  for (const auto& n : in.requirements.expected)
    if (auto e = check_name(n, "[libraries] expected")) return *e;
  for (const auto& n : in.requirements.optional)
    if (auto e = check_name(n, "[libraries] optional")) return *e;
  out.without = in.without;
  std::sort(out.without.begin(), out.without.end());
  out.without.erase(std::unique(out.without.begin(), out.without.end()), out.without.end());

  // Every requirement, then what --without names beyond them (still recorded, still switched off).
  std::vector<std::pair<std::string, bool>> names;
  for (const auto& n : in.requirements.expected) names.emplace_back(n, true);
  for (const auto& n : in.requirements.optional) names.emplace_back(n, false);
  for (const auto& w : out.without)
    if (std::none_of(names.begin(), names.end(), [&](const auto& p) { return p.first == w; })) names.emplace_back(w, false);

  auto set_keyed = [&](const std::string& k, const std::string& v) {
    if (!in.fixed_env.count(k)) out.keyed_env[k] = v;
  };
  for (const auto& [name, expected] : names) {
    auto specs = providers(in.specs, name);
    // A provider of another machine (NVPL on x86_64) is no choice here, unless a variable of the
    // recipe or --env selects it by name: then its own line says it is missing.
    const recipe::LibrarySpec* named = selected_by(specs, in.fixed_env);
    auto here = specs;
    std::erase_if(here, [&](const auto* s) { return s != named && !recipe::exists_for(*s, in.machine); });
    if (!here.empty()) specs = std::move(here);  // none for this machine: its missing line names them
    LibraryChoice c;
    c.name = name;
    c.expected = expected;
    c.library = specs.front()->name;
    std::vector<std::string> titles, advice;
    for (const auto* s : specs) {
      titles.push_back(s->title);
      if (!s->advice.empty()) advice.push_back(s->advice);
    }
    c.title = text::join(titles, " or ");
    c.advice = text::join(advice, "; or ");
    c.summary = specs.front()->summary;
    c.summary_on = specs.front()->summary_on;

    if (std::find(out.without.begin(), out.without.end(), name) != out.without.end()) {
      c.state = LibraryState::without;
      c.reason = fmt::format("--without {}", name);
      for (const auto* s : specs) {
        if (!s->switch_env.empty()) set_keyed(s->switch_env, "0");
        for (const auto& [k, v] : s->off) set_keyed(k, v);
      }
      out.choices.push_back(std::move(c));
      continue;
    }
    std::optional<std::string> off;
    for (const auto* s : specs)
      if (!off) off = switched_off(*s, in);
    if (off) {
      c.state = LibraryState::off;
      c.reason = *off;
      out.choices.push_back(std::move(c));
      continue;
    }
    // The recipe or --env selecting one provider (--env BLAS=NVPL): only that one is looked for.
    const recipe::LibrarySpec* fixed_choice = selected_by(specs, in.fixed_env);
    std::optional<std::string> declined;
    if (!fixed_choice)
      for (const auto* s : specs)
        if (!declined) declined = host_declined(*s, in);
    // The official builds' choice (BLAS=NVPL on sbsa), first in the order, unless fixed above.
    const recipe::LibrarySpec* preferred = fixed_choice ? nullptr : selected_by(specs, in.preferred_env, in.fixed_env);
    std::vector<const recipe::LibrarySpec*> order = specs;
    if (fixed_choice) order = {fixed_choice};
    if (preferred) {
      order.erase(std::find(order.begin(), order.end(), preferred));
      order.insert(order.begin(), preferred);
    }
    // The first place in preference order (facts are in that order per library), providers in
    // their data order (MKL before OpenBLAS: PyTorch's default BLAS).
    for (const auto* s : declined ? std::vector<const recipe::LibrarySpec*>{} : order) {
      auto it = std::find_if(in.facts.found.begin(), in.facts.found.end(),
                             [&](const LibraryCandidate& f) { return f.library == s->name; });
      if (it == in.facts.found.end()) continue;
      c.state = LibraryState::found;
      c.library = s->name;
      c.from = *it;
      c.summary = s->summary;
      c.summary_on = s->summary_on;
      if (!s->switch_env.empty()) set_keyed(s->switch_env, "1");
      for (const auto& [k, v] : s->on) set_keyed(k, v);
      for (const auto& [k, v] : s->paths)
        if (!in.fixed_env.count(k)) out.path_env[k] = fill(v, *it);
      break;
    }
    if (preferred && c.state == LibraryState::found) {
      auto used = std::find_if(specs.begin(), specs.end(), [&](const auto* s) { return s->name == c.library; });
      c.note = c.library == preferred->name
                   ? fmt::format("{} as {}", assignments(preferred->on), in.preferred_from)
                   : fmt::format("{} of {} not used: {} not found ({}); {} instead", assignments(preferred->on),
                                 in.preferred_from, preferred->title, preferred->advice, (*used)->title);
    }
    if (fixed_choice && c.state != LibraryState::found) {
      // The variable names this provider and no other: the others do not stand in for it.
      auto from = in.fixed_from.find(fixed_choice->on.begin()->first);
      c.title = fixed_choice->title;
      c.advice = fixed_choice->advice;
      c.note = fmt::format("{} from {} selects {}: not found", assignments(fixed_choice->on),
                           from == in.fixed_from.end() ? std::string("the recipe's [build.env]") : from->second,
                           fixed_choice->title);
    }
    if (c.state != LibraryState::found) {
      if (auto f = in.from_fetch.find(name); f != in.from_fetch.end()) {
        c.state = LibraryState::source;
        c.reason = fmt::format("not on this host: the build compiles it from {} (a [[fetch]] of the recipe, placed "
                               "through archbuild's mirrors at the commit the tree pins)", f->second);
        if (declined) c.reason = *declined + ": the host's copy is not used; the build compiles it from " + f->second +
                                 " (a [[fetch]] of the recipe, placed through archbuild's mirrors at the commit the tree pins)";
        for (const auto* s : specs)
          if (!s->switch_env.empty()) set_keyed(s->switch_env, "1");
        out.choices.push_back(std::move(c));
        continue;
      }
      if (declined) {
        c.state = LibraryState::source;
        c.reason = *declined + ": the host's copy is not used; the build compiles its own (no [[fetch]] of the recipe "
                               "places it, so the tree's build downloads it)";
        out.choices.push_back(std::move(c));
        continue;
      }
      c.state = expected ? LibraryState::missing : LibraryState::absent;
      c.reason = in.facts.probed ? "not found in the variables the build gets, the build environment's site-packages, "
                                   "the CUDA toolkit or the system folders"
                                 : "not looked for";
      // Optional and absent: said off explicitly, so the build's own fallback is not silent.
      if (!expected)
        for (const auto* s : specs)
          if (!s->switch_env.empty()) set_keyed(s->switch_env, "0");
    }
    out.choices.push_back(std::move(c));
  }
  return out;
}

std::optional<Error> missing_libraries(const LibraryPlan& p) {
  std::vector<std::string> parts, names;
  for (const auto& c : p.choices)
    if (c.state == LibraryState::missing) {
      parts.push_back(fmt::format("{} ({}): {}{}", c.name, c.title, c.advice,
                                  c.note.empty() ? "" : " [" + c.note + "; drop it to use another provider]"));
      names.push_back(c.name);
    }
  if (parts.empty()) return std::nullopt;
  return Error::missing_tool(fmt::format("the recipe expects {} but this host lacks {}: {}; or build without "
                                         "(recorded in the manifest): --without {}",
                                         names.size() == 1 ? "a library" : "libraries", text::join(names, ", "),
                                         text::join(parts, "; "), text::join(names, ",")));
}

json to_json(const LibraryChoice& c) {
  json j = {{"name", c.name},
            {"library", c.library},
            {"title", c.title},
            {"expected", c.expected},
            {"state", std::string(to_string(c.state))}};
  if (c.from)
    j["from"] = {{"origin", std::string(to_string(c.from->origin))},
                 {"via", c.from->via},
                 {"root", c.from->root.string()},
                 {"include_dir", c.from->include_dir.string()},
                 {"lib_dir", c.from->lib_dir.string()},
                 {"lib_file", c.from->lib_file.string()},
                 {"version", c.from->version ? json(*c.from->version) : json(nullptr)}};
  else
    j["from"] = nullptr;
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (!c.note.empty()) j["note"] = c.note;
  if (c.state == LibraryState::missing || c.state == LibraryState::absent) j["advice"] = c.advice;
  j["feature"] = !c.summary.empty() ? c.summary : c.summary_on;
  return j;
}

json to_json(const LibraryPlan& p) {
  json a = json::array();
  for (const auto& c : p.choices) a.push_back(to_json(c));
  return {{"libraries", a}, {"without", p.without}, {"env", p.keyed_env}, {"path_env", p.path_env}};
}

json key_json(const LibraryPlan& p) {
  json a = json::array();
  for (const auto& c : p.choices)
    a.push_back({{"name", c.name},
                 {"library", c.library},
                 {"state", std::string(to_string(c.state))},
                 {"origin", c.from ? json(std::string(to_string(c.from->origin))) : json(nullptr)},
                 {"version", c.from && c.from->version ? json(*c.from->version) : json(nullptr)}});
  return a;
}

std::string describe(const LibraryChoice& c) {
  std::string head = fmt::format("{:<11} {:<9}", c.name, std::string(to_string(c.state)) + (c.expected ? "" : "*"));
  switch (c.state) {
    case LibraryState::found: {
      const auto& f = *c.from;
      std::string where = f.origin == LibraryOrigin::toolkit ? fmt::format("the toolkit ({})", f.via)
                          : f.origin == LibraryOrigin::pip  ? fmt::format("pip package {}", f.via)
                          : f.origin == LibraryOrigin::system ? std::string("the system")
                                                              : fmt::format("${}", f.via);
      return fmt::format("{} {} {} from {}: {}{}", head, c.library, f.version.value_or("(version unknown)"), where,
                         f.lib_file.string(), c.note.empty() ? "" : " (" + c.note + ")");
    }
    case LibraryState::missing:
      return fmt::format("{} {} — {}{}", head, c.title, c.advice, c.note.empty() ? "" : " (" + c.note + ")");
    case LibraryState::absent: return fmt::format("{} {} not found: built without it ({})", head, c.title, c.advice);
    case LibraryState::without:
    case LibraryState::source:
    case LibraryState::off: return fmt::format("{} {}: {}", head, c.title, c.reason);
  }
  return head;
}

}  // namespace archbuild::plan
