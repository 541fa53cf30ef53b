#include "validate/report.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/text.hpp"

namespace archbuild::validate {

std::string_view to_string(Status s) {
  switch (s) {
    case Status::pass: return "pass";
    case Status::warn: return "warn";
    case Status::skip: return "skip";
    case Status::fail: return "fail";
  }
  return "fail";
}

bool Report::failed() const {
  return std::any_of(checks.begin(), checks.end(), [](const Check& c) { return c.status == Status::fail; });
}

bool Report::incomplete() const {
  return std::any_of(checks.begin(), checks.end(), [](const Check& c) { return c.missing_tool; });
}

Exit Report::exit() const {
  if (failed()) return Exit::not_fine;
  if (incomplete()) return Exit::missing_tool;
  return Exit::ok;
}

const Check* Report::find(std::string_view name) const {
  for (const auto& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

std::vector<std::string> Report::failed_names() const {
  std::vector<std::string> out;
  for (const auto& c : checks)
    if (c.status == Status::fail) out.push_back(c.name);
  return out;
}

void Report::append(const Report& other) {
  for (const auto& c : other.checks) checks.push_back(c);
}

nlohmann::json Report::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : checks) {
    nlohmann::json j = {{"name", c.name},
                        {"status", to_string(c.status)},
                        {"summary", c.summary},
                        {"details", c.details},
                        {"evidence", c.evidence}};
    if (c.missing_tool) j["missing_tool"] = true;
    list.push_back(std::move(j));
  }
  return {{"subject", subject}, {"valid", !failed()}, {"exit", static_cast<int>(exit())}, {"checks", list}};
}

std::string targets_text(const std::vector<arch::Arch>& targets) {
  std::vector<std::string> out;
  for (const auto& a : targets) {
    std::string s = a.cc_name();
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return text::join(out, ", ");
}

void select_gpu(std::map<std::string, std::string>& env, const Gpu& gpu) {
  env["CUDA_VISIBLE_DEVICES"] = gpu.select.empty() ? std::to_string(gpu.index) : gpu.select;
  if (gpu.select.empty() || gpu.pci_order) env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
}

std::optional<Gpu> matching_gpu(const Gpus& gpus, const std::vector<arch::Arch>& targets, std::string* reason) {
  for (const auto& g : gpus.gpus)
    for (const auto& t : targets)
      if (t.cc == g.cc) return g;
  if (reason) {
    if (gpus.gpus.empty()) {
      *reason = "no GPU" + (gpus.why_none.empty() ? std::string() : " (" + gpus.why_none + ")");
    } else {
      std::vector<std::string> seen;
      for (const auto& g : gpus.gpus) seen.push_back(fmt::format("{} ({})", g.name, g.cc.str()));
      *reason = fmt::format("the GPU{} here {} {}, not a target ({})", gpus.gpus.size() == 1 ? "" : "s",
                            gpus.gpus.size() == 1 ? "is" : "are", text::join(seen, ", "), targets_text(targets));
    }
  }
  return std::nullopt;
}

std::vector<std::string> tail_lines(const Outcome& o, std::size_t n) {
  // stderr usually says why; stdout when stderr is silent.
  std::vector<std::string> lines;
  for (auto& l : text::split_any(text::trim(o.err).empty() ? o.out : o.err, "\n")) {
    auto t = text::trim(l);
    if (!t.empty()) lines.push_back(std::move(t));
  }
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(n));
  return lines;
}

Result<Scratch> Scratch::make(const std::optional<std::filesystem::path>& keep_in, std::string_view prefix) {
  std::error_code ec;
  if (keep_in) {
    std::filesystem::create_directories(*keep_in, ec);
    if (ec) return Error::bad_input(fmt::format("{}: cannot create: {}", keep_in->string(), ec.message()));
    return Scratch(*keep_in, false);
  }
  auto base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string templ = (base / (std::string(prefix) + "-XXXXXX")).string();
  if (!mkdtemp(templ.data()))
    return Error::bad_input(fmt::format("cannot create a temporary folder in {}: {}", base.string(), std::strerror(errno)));
  return Scratch(templ, true);
}

Scratch::Scratch(Scratch&& other) noexcept : path_(std::move(other.path_)), remove_(other.remove_) {
  other.remove_ = false;
}

Scratch::~Scratch() {
  if (!remove_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);  // best effort: a leftover temp folder is harmless
}

}  // namespace archbuild::validate
