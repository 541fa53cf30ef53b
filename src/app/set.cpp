#include "app/set.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/text.hpp"
#include "plan/resolve.hpp"

namespace archbuild::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_dependent(const std::string& recipe_arg, const Facts& facts) {
  if (recipe_arg.empty()) return false;  // the torch recipes
  auto candidates = plan::select_recipes(recipe_arg, facts.recipes(), facts.search()).take();
  return !candidates.empty() && std::all_of(candidates.begin(), candidates.end(),
                                            [](const recipe::Recipe& r) { return r.torch.has_value(); });
}

void throw_unless_ok(const plan::Resolution& r, const Session& s, const ShowRefusal& refused) {
  if (r.status == Exit::ok) return;
  if (!s.json && refused) refused(r);  // --json: the one document the command prints
  throw Failure({r.status, r.message});
}

plan::Resolution resolve_or_throw(const ResolveArgs& a, const Session& s, const ShowRefusal& refused) {
  plan::Resolution r = resolve_from_args(a, s);
  throw_unless_ok(r, s, refused);
  return r;
}

// torch's resolution: a refusal throws; a missing tool is left for after the pairing (the choice
// of recipe stands, and a mismatched pair is bad input whatever is installed).
plan::Resolution resolve_torch(const ResolveArgs& a, const Session& s, const ShowRefusal& refused) {
  plan::Resolution r = resolve_from_args(a, s);
  if (r.status == Exit::bad_input) throw_unless_ok(r, s, refused);
  return r;
}

// A dependent built on torch's CUDA and interpreter, from its recipe file; the options that say
// how to build one recipe (source, --ref, --env, --without, --patch) stay with the recipe they were given for.
ResolveArgs dependent_args(const ResolveArgs& user, const plan::Resolution& torch, const recipe::Recipe& dep,
                           bool keep_build_options) {
  ResolveArgs a = user;
  a.recipe = dep.file.string();
  a.torch.clear();
  a.cuda = torch.toolchain.cuda.str();
  a.python = torch.python->path.string();
  if (!keep_build_options) {
    a.source_url.clear();
    a.source_dir.clear();
    a.ref.clear();
    a.env.clear();
    a.without.clear();
    a.patches.clear();
  }
  return a;
}

// The torch a dependent named on its own (--recipe torchvision-0.29) builds against: its
// torch_recipe, else the shipped torch recipe of its `torch` release line.
ResolveArgs torch_args_for(const ResolveArgs& user, const recipe::Recipe& dep) {
  ResolveArgs a = user;
  a.recipe = dep.torch_recipe.value_or("");
  a.torch = dep.torch_recipe ? "" : dep.torch->prefix(2).str();
  a.source_url.clear();
  a.source_dir.clear();
  a.ref.clear();
  a.env.clear();
  a.without.clear();
  a.patches.clear();
  a.torch_wheel.clear();
  return a;
}

// How a dependent pairs with torch: its own release line, else one it also serves (pair_with_torch
// accepted it on one of the two).
std::string paired_through(const recipe::Recipe& dep, const recipe::Recipe& torch) {
  return dep.torch && dep.torch->prefix(2) == torch.version.prefix(2) ? "torch" : "torch_also";
}

// --with torchvision,torchaudio (repeatable): the names, split here so that an item left out
// ("torchvision,,", "torchvision, ") is a typo said as such, not a recipe named "".
std::vector<std::string> with_names(const std::vector<std::string>& values) {
  std::vector<std::string> names;
  for (const auto& value : values)
    for (std::size_t from = 0;;) {
      const std::size_t comma = value.find(',', from);
      const std::string item = value.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
      if (text::trim(item).empty() || text::trim(item) != item)
        throw Failure(Error::bad_input(fmt::format("--with {}: {}; give recipe names separated by commas, e.g. --with "
                                                   "torchvision,torchaudio",
                                                   text::quoted(value),
                                                   text::trim(item).empty() ? "an empty item" : "spaces around a name")));
      names.push_back(item);
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  return names;
}

using Role = SetMember::Role;

}  // namespace

bool asks_for_set(const ResolveArgs& args, const std::vector<std::string>& with, const Facts& facts) {
  return !with.empty() || (args.torch_wheel.empty() && is_dependent(args.recipe, facts));
}

std::vector<SetMember> resolve_set(const ResolveArgs& user, const std::vector<std::string>& with_values, const Session& s,
                                   const ShowRefusal& refused) {
  const std::vector<std::string> with = with_names(with_values);
  // One torch wheel is installed into each dependent's build venv: the set is for one interpreter.
  if (user.python.find(',') != std::string::npos)
    throw Failure(Error::bad_input(fmt::format(
        "--python {}: {} builds the set (torch, then what builds against it) for one interpreter; give --python "
        "one interpreter (and run once per interpreter)", user.python, with.empty() ? "--recipe " + user.recipe : "--with")));
  std::vector<SetMember> set;
  if (with.empty()) {
    // A dependent on its own: the user's options are its own; torch comes from its recipe.
    plan::Resolution dep = resolve_or_throw(user, s, refused);
    ResolveArgs ta = torch_args_for(user, dep.recipe);
    plan::Resolution torch = resolve_torch(ta, s, refused);
    auto paired = plan::pair_with_torch({dep.recipe}, torch.recipe,
                                        fmt::format("{} (torch_recipe {})", dep.recipe.name, torch.recipe.name));
    if (!paired) throw Failure(paired.error());
    throw_unless_ok(torch, s, refused);
    set.push_back({Role::torch, ta, torch, "", ""});
    ResolveArgs da = dependent_args(user, torch, dep.recipe, true);
    set.push_back({Role::dependent, da, resolve_or_throw(da, s, refused), paired_through(dep.recipe, torch.recipe),
                   dep.recipe.torch_recipe ? "torch_recipe" : "torch"});
    return set;
  }
  if (is_dependent(user.recipe, s.facts()))
    throw Failure(Error::bad_input(fmt::format(
        "--recipe {} builds against torch itself; --with names what builds against the torch of --recipe (e.g. "
        "--recipe torch-2.14 --with torchvision), or drop --with to build {} and its torch", user.recipe, user.recipe)));
  ResolveArgs ta = user;
  ta.torch_wheel.clear();
  plan::Resolution torch = resolve_torch(ta, s, refused);
  std::vector<recipe::Recipe> deps;
  for (const auto& name : with) {
    auto candidates = plan::select_recipes(name, s.facts().recipes(), s.facts().search());
    if (!candidates) throw Failure(Error{candidates.error().exit, "--with " + name + ": " + candidates.error().message});
    auto dep = plan::pair_with_torch(*candidates, torch.recipe, "--with " + name);
    if (!dep) throw Failure(dep.error());
    if (std::none_of(deps.begin(), deps.end(), [&](const recipe::Recipe& d) { return d.file == dep->file; }))
      deps.push_back(std::move(*dep));  // named twice: built once
  }
  throw_unless_ok(torch, s, refused);
  set.push_back({Role::torch, ta, torch, "", ""});
  for (const auto& dep : deps) {
    ResolveArgs da = dependent_args(user, torch, dep, false);
    da.torch_wheel.clear();
    set.push_back({Role::dependent, da, resolve_or_throw(da, s, refused), paired_through(dep, torch.recipe), ""});
  }
  return set;
}

json pairing_json(const SetMember& dependent, const SetMember& torch) {
  const recipe::Recipe& d = dependent.resolution.recipe;
  const recipe::Recipe& t = torch.resolution.recipe;
  json also = json::array();
  for (const auto& v : d.torch_also) also.push_back(v.str());
  return {{"torch", {{"recipe", t.name}, {"package", t.package}, {"version", t.version.str()}}},
          {"through", dependent.paired_through},
          {"torch_key", d.torch ? json(d.torch->str()) : json(nullptr)},
          {"torch_also", also},
          {"torch_from", dependent.torch_from.empty() ? json("--recipe") : json(dependent.torch_from)}};
}

std::string pairing_text(const SetMember& dependent, const SetMember& torch) {
  const recipe::Recipe& d = dependent.resolution.recipe;
  const recipe::Recipe& t = torch.resolution.recipe;
  std::string through = dependent.paired_through == "torch"
                            ? fmt::format("its `torch` key {}", d.torch ? d.torch->str() : "?")
                            : fmt::format("its `torch_also` {} (its own `torch` is {})",
                                          t.version.prefix(2).str(), d.torch ? d.torch->str() : "?");
  return fmt::format("pairs with {} ({} {}) through {}", t.name, t.package, t.version.str(), through);
}

SetOutcome build_set(const BuildArgs& args, const std::vector<std::string>& with, const Session& s, const Show& show,
                     const ShowRefusal& refused) {
  SetOutcome set;
  set.members = resolve_set(args.resolve, with, s, refused);
  const auto& members = set.members;
  if (s.verbosity >= 0) {
    std::vector<std::string> names;
    for (const auto& m : members) names.push_back(fmt::format("{} {}", m.resolution.recipe.package, m.resolution.recipe.version.str()));
    note(s, fmt::format("the set: {} (CUDA {}, Python {}), built in this order", text::join(names, ", "),
                        members.front().resolution.toolchain.cuda.str(), members.front().resolution.python->version.str()));
  }
  json wheels = json::array();
  Exit worst = Exit::ok;
  std::string torch_wheel, first_error;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const SetMember& m = members[i];
    const recipe::Recipe& rc = m.resolution.recipe;
    // Humans: which member the stage lines and "built"/"reused" that follow are about.
    if (!s.json && s.verbosity >= 0)
      note(s, fmt::format("[{}/{}] {} {} {} ({}){}", i + 1, members.size(), m.role_name(), rc.package, rc.version.str(),
                          rc.name, m.role == Role::dependent ? ": " + pairing_text(m, members.front()) : ""));
    MemberBuild b;
    b.member = i;
    b.entry = {{"role", m.role_name()}, {"recipe", rc.name}, {"package", rc.package}};
    BuildArgs a = args;
    a.resolve = m.args;
    if (m.role == Role::dependent) {
      b.entry["pairs_with"] = pairing_json(m, members.front());
      if (torch_wheel.empty()) {
        b.entry["ok"] = false;
        b.entry["error"] = "not built: the torch it builds against was not built";
        wheels.push_back(b.entry);
        set.builds.push_back(std::move(b));
        continue;
      }
      a.resolve.torch_wheel = torch_wheel;
    }
    // Each member as `wheel` builds one recipe: its own budget and store, so bad input in them is
    // that member's failure.
    json doc;
    try {
      plan::PlanOptions budget;
      memory_budget_from_args(a.resolve, budget);
      std::optional<remote::BuildStore> build_store = open_store(a.store);
      b.outcome = build(a, m.resolution, budget, build_store, s, show);
      doc = b.outcome->doc;
      if (b.outcome->error) {
        b.error = b.outcome->error;
        error_line(s, b.error->message);
      }
    } catch (const Failure& f) {
      b.error = f.error;
      if (!s.json) error_line(s, f.error.message);
      doc = {{"ok", false}, {"error", f.error.message}, {"exit", static_cast<int>(f.error.exit)}};
    }
    b.entry.update(doc);
    if (b.error) {
      worst = std::max(worst, b.error->exit);
      if (first_error.empty()) first_error = fmt::format("{}: {}", rc.name, b.error->message);
    }
    if (m.role == Role::torch && !b.wheel().empty() && fs::exists(b.wheel())) torch_wheel = fs::absolute(b.wheel()).string();
    wheels.push_back(b.entry);
    set.builds.push_back(std::move(b));
  }
  set.doc = {{"ok", worst == Exit::ok}, {"wheels", wheels}};
  if (worst != Exit::ok) {
    set.error = Error{worst, first_error};
    set.doc["error"] = first_error;
    set.doc["exit"] = static_cast<int>(worst);
    if (!s.json) error_line(s, "the set is incomplete: " + first_error);
  }
  return set;
}

}  // namespace archbuild::app
