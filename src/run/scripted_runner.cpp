#include "run/scripted_runner.hpp"

#include <fstream>

namespace archbuild::run {

bool ScriptedRunner::argv_matches(const std::vector<std::string>& argv,
                                  const std::vector<std::string>& prefix) {
  if (prefix.size() > argv.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (i == 0 && prefix[0].find('/') == std::string::npos) {
      if (std::filesystem::path(argv[0]).filename() != prefix[0]) return false;
    } else if (argv[i] != prefix[i]) {
      return false;
    }
  }
  return true;
}

ScriptedRunner& ScriptedRunner::on(std::vector<std::string> argv_prefix, ScriptedResponse response,
                                   int times) {
  return on([prefix = std::move(argv_prefix)](const Command& c) { return argv_matches(c.argv, prefix); },
            std::move(response), times);
}

ScriptedRunner& ScriptedRunner::on(Match match, ScriptedResponse response, int times) {
  rules_.push_back({std::move(match), std::move(response), times});
  return *this;
}

ScriptedRunner& ScriptedRunner::otherwise(ScriptedResponse response) {
  fallback_ = std::move(response);
  strict_ = false;
  return *this;
}

ScriptedRunner& ScriptedRunner::strict() {
  strict_ = true;
  return *this;
}

std::vector<Command> ScriptedRunner::calls_matching(const std::vector<std::string>& argv_prefix) const {
  std::vector<Command> out;
  for (const auto& c : calls_)
    if (argv_matches(c.argv, argv_prefix)) out.push_back(c);
  return out;
}

CommandResult ScriptedRunner::run(const Command& cmd, const LineCallback& on_line,
                                  const TickCallback& on_tick) {
  calls_.push_back(cmd);
  const ScriptedResponse* response = nullptr;
  for (auto& rule : rules_) {
    if (rule.remaining < 0 || !rule.match(cmd)) continue;
    response = &rule.response;
    if (rule.remaining > 0 && --rule.remaining == 0) rule.remaining = -1;  // retired
    break;
  }
  CommandResult result;
  if (!response && strict_) {
    result.error = "unexpected command: " + quote_argv(cmd.argv);
    return result;
  }
  const ScriptedResponse& r = response ? *response : fallback_;
  if (r.start_error) {
    result.error = r.error;
    return result;
  }
  result.started = true;
  std::ofstream log;
  if (!cmd.log.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cmd.log.parent_path(), ec);
    log.open(cmd.log, cmd.append_log ? std::ios::app : std::ios::trunc);
    log << "# archbuild ran: " << quote_argv(cmd.argv) << "\n";
  }
  for (const auto& line : r.lines) {
    if (log) log << line << "\n";
    if (on_line) on_line(line);
  }
  if (on_tick) on_tick();
  std::filesystem::path cwd = cmd.cwd.empty() ? std::filesystem::current_path() : cmd.cwd;
  for (const auto& [rel, content] : r.files) {
    auto p = rel.is_absolute() ? rel : cwd / rel;
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << content;
  }
  if (r.effect) r.effect(cmd);
  result.exit_status = r.signal ? -1 : r.exit_status;
  result.signal = r.signal;
  result.interrupted = r.interrupted;
  if (log && !result.ok()) log << "# archbuild: " << result.describe() << "\n";
  return result;
}

}  // namespace archbuild::run
