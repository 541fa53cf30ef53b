#include "cli/stack.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "plan/resolve.hpp"

namespace archbuild::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// stdout while a member runs: its document (or its human lines) is gathered, not printed.
class CapturedStdout {
 public:
  CapturedStdout() : old_(std::cout.rdbuf(buf_.rdbuf())) {}
  ~CapturedStdout() { std::cout.rdbuf(old_); }
  CapturedStdout(const CapturedStdout&) = delete;
  CapturedStdout& operator=(const CapturedStdout&) = delete;
  std::string text() const { return buf_.str(); }

 private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

bool is_dependent(const std::string& recipe_arg) {
  if (recipe_arg.empty()) return false;  // the torch recipes
  auto candidates = plan::select_recipes(recipe_arg).take();
  return !candidates.empty() && std::all_of(candidates.begin(), candidates.end(),
                                            [](const recipe::Recipe& r) { return r.torch.has_value(); });
}

void throw_unless_ok(const plan::Resolution& r, const Context& ctx) {
  if (r.status == Exit::ok) return;
  if (!ctx.json) print_resolution(r, ctx);  // --json: the one document main prints
  throw Failure({r.status, r.message});
}

plan::Resolution resolve_or_throw(const ResolveArgs& a, const Context& ctx) {
  plan::Resolution r = resolve_from_args(a, ctx);
  throw_unless_ok(r, ctx);
  return r;
}

// torch's resolution: a refusal throws; a missing tool is left for after the pairing (the choice
// of recipe stands, and a mismatched pair is bad input whatever is installed).
plan::Resolution resolve_torch(const ResolveArgs& a, const Context& ctx) {
  plan::Resolution r = resolve_from_args(a, ctx);
  if (r.status == Exit::bad_input) throw_unless_ok(r, ctx);
  return r;
}

// A dependent built on torch's CUDA and interpreter, from its recipe file; the options that say
// how to build one recipe (source, --ref, --env, --without) stay with the recipe they were given for.
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
  a.torch_wheel.clear();
  return a;
}

// How a dependent pairs with torch: its own release line, else one it also serves (pair_with_torch
// accepted it on one of the two).
std::string paired_through(const recipe::Recipe& dep, const recipe::Recipe& torch) {
  return dep.torch && dep.torch->prefix(2) == torch.version.prefix(2) ? "torch" : "torch_also";
}

// The wheel a member's output names: "wheel" of its document, else its last line (human output).
std::string wheel_of(const std::string& output, const json& doc) {
  if (doc.is_object() && doc.contains("wheel") && doc["wheel"].is_string()) return doc["wheel"];
  std::string last;
  for (const auto& line : text::split_any(output, "\n"))
    if (text::trim(line).ends_with(".whl")) last = text::trim(line);
  return last;
}

}  // namespace

bool asks_for_set(const ResolveArgs& args, const std::vector<std::string>& with) {
  return !with.empty() || (args.torch_wheel.empty() && is_dependent(args.recipe));
}

namespace {

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

}  // namespace

std::vector<StackMember> resolve_set(const ResolveArgs& user, const std::vector<std::string>& with_values,
                                     const Context& ctx) {
  const std::vector<std::string> with = with_names(with_values);
  // One torch wheel is installed into each dependent's build venv: the set is for one interpreter.
  if (user.python.find(',') != std::string::npos)
    throw Failure(Error::bad_input(fmt::format(
        "--python {}: {} builds the set (torch, then what builds against it) for one interpreter; give --python "
        "one interpreter (and run once per interpreter)", user.python, with.empty() ? "--recipe " + user.recipe : "--with")));
  std::vector<StackMember> set;
  if (with.empty()) {
    // A dependent on its own: the user's options are its own; torch comes from its recipe.
    plan::Resolution dep = resolve_or_throw(user, ctx);
    ResolveArgs ta = torch_args_for(user, dep.recipe);
    plan::Resolution torch = resolve_torch(ta, ctx);
    auto paired = plan::pair_with_torch({dep.recipe}, torch.recipe,
                                        fmt::format("{} (torch_recipe {})", dep.recipe.name, torch.recipe.name));
    if (!paired) throw Failure(paired.error());
    throw_unless_ok(torch, ctx);
    set.push_back({"torch", ta, torch, "", ""});
    ResolveArgs da = dependent_args(user, torch, dep.recipe, true);
    set.push_back({"dependent", da, resolve_or_throw(da, ctx), paired_through(dep.recipe, torch.recipe),
                   dep.recipe.torch_recipe ? "torch_recipe" : "torch"});
    return set;
  }
  if (is_dependent(user.recipe))
    throw Failure(Error::bad_input(fmt::format(
        "--recipe {} builds against torch itself; --with names what builds against the torch of --recipe (e.g. "
        "--recipe torch-2.14 --with torchvision), or drop --with to build {} and its torch", user.recipe, user.recipe)));
  ResolveArgs ta = user;
  ta.torch_wheel.clear();
  plan::Resolution torch = resolve_torch(ta, ctx);
  std::vector<recipe::Recipe> deps;
  for (const auto& name : with) {
    auto candidates = plan::select_recipes(name);
    if (!candidates) throw Failure(Error{candidates.error().exit, "--with " + name + ": " + candidates.error().message});
    auto dep = plan::pair_with_torch(*candidates, torch.recipe, "--with " + name);
    if (!dep) throw Failure(dep.error());
    if (std::none_of(deps.begin(), deps.end(), [&](const recipe::Recipe& d) { return d.file == dep->file; }))
      deps.push_back(std::move(*dep));  // named twice: built once
  }
  throw_unless_ok(torch, ctx);
  set.push_back({"torch", ta, torch, "", ""});
  for (const auto& dep : deps) {
    ResolveArgs da = dependent_args(user, torch, dep, false);
    da.torch_wheel.clear();
    set.push_back({"dependent", da, resolve_or_throw(da, ctx), paired_through(dep, torch.recipe), ""});
  }
  return set;
}

json pairing_json(const StackMember& dependent, const StackMember& torch) {
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

std::string pairing_text(const StackMember& dependent, const StackMember& torch) {
  const recipe::Recipe& d = dependent.resolution.recipe;
  const recipe::Recipe& t = torch.resolution.recipe;
  std::string through = dependent.paired_through == "torch"
                            ? fmt::format("its `torch` key {}", d.torch ? d.torch->str() : "?")
                            : fmt::format("its `torch_also` {} (its own `torch` is {})",
                                          t.version.prefix(2).str(), d.torch ? d.torch->str() : "?");
  return fmt::format("pairs with {} ({} {}) through {}", t.name, t.package, t.version.str(), through);
}

bool run_stack_if_asked(const ResolveArgs& args, const std::vector<std::string>& with, Context& ctx,
                        const BuildMember& build) {
  if (!asks_for_set(args, with)) return false;
  std::vector<StackMember> set = resolve_set(args, with, ctx);
  if (ctx.verbosity >= 0) {
    std::vector<std::string> names;
    for (const auto& m : set) names.push_back(fmt::format("{} {}", m.resolution.recipe.package, m.resolution.recipe.version.str()));
    note(ctx, fmt::format("the set: {} (CUDA {}, Python {}), built in this order", text::join(names, ", "),
                          set.front().resolution.toolchain.cuda.str(), set.front().resolution.python->version.str()));
  }

  json wheels = json::array();
  Exit worst = Exit::ok;
  std::string torch_wheel, first_error;
  std::size_t index = 0;
  for (auto& m : set) {
    const recipe::Recipe& rc = m.resolution.recipe;
    // Humans: which member the stage lines and "built"/"reused" that follow are about.
    if (!ctx.json && ctx.verbosity >= 0)
      note(ctx, fmt::format("[{}/{}] {} {} {} ({}){}", ++index, set.size(), m.role, rc.package, rc.version.str(),
                            rc.name, m.role == "dependent" ? ": " + pairing_text(m, set.front()) : ""));
    json entry = {{"role", m.role}, {"recipe", rc.name}, {"package", rc.package}};
    if (m.role == "dependent") {
      entry["pairs_with"] = pairing_json(m, set.front());
      if (torch_wheel.empty()) {
        entry["ok"] = false;
        entry["error"] = "not built: the torch it builds against was not built";
        wheels.push_back(entry);
        continue;
      }
      m.args.torch_wheel = torch_wheel;
    }
    Context mctx = ctx;
    mctx.exit = Exit::ok;
    std::string output;
    std::optional<Error> failed;
    {
      CapturedStdout capture;
      try {
        build(m.args, mctx);
      } catch (const Failure& f) {
        failed = f.error;
      }
      output = capture.text();
    }
    json doc = ctx.json ? json::parse(output, nullptr, false) : json();
    if (!ctx.json) std::cout << output;
    if (failed) {
      if (!ctx.json) error_line(ctx, failed->message);
      mctx.exit = failed->exit;
      if (!doc.is_object()) doc = {{"ok", false}, {"error", failed->message}, {"exit", static_cast<int>(failed->exit)}};
    }
    if (doc.is_object()) entry.update(doc);
    if (static_cast<int>(mctx.exit) > static_cast<int>(worst)) worst = mctx.exit;
    if (mctx.exit != Exit::ok && first_error.empty())
      first_error = fmt::format("{}: {}", m.resolution.recipe.name,
                                failed ? failed->message : doc.is_object() ? doc.value("error", "failed") : "failed");
    std::string wheel = mctx.exit == Exit::ok ? wheel_of(output, doc) : "";
    if (m.role == "torch" && !wheel.empty() && fs::exists(wheel)) torch_wheel = fs::absolute(wheel).string();
    wheels.push_back(entry);
  }
  ctx.exit = worst;
  if (ctx.json) {
    json doc = {{"ok", worst == Exit::ok}, {"wheels", wheels}};
    if (worst != Exit::ok) {
      doc["error"] = first_error;
      doc["exit"] = static_cast<int>(worst);
    }
    print_json(doc);
  } else if (worst != Exit::ok) {
    error_line(ctx, "the set is incomplete: " + first_error);
  }
  return true;
}

}  // namespace archbuild::cli
