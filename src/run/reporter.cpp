#include "run/reporter.hpp"

#include <chrono>
#include <cmath>
#include <ostream>
#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace archbuild::run {

std::string_view to_string(StageStatus s) {
  switch (s) {
    case StageStatus::ok: return "ok";
    case StageStatus::failed: return "failed";
    case StageStatus::interrupted: return "interrupted";
    case StageStatus::skipped: return "skipped";
  }
  return "?";
}

Clock steady_clock_seconds() {
  return [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  };
}

void Reporter::output(std::string_view text) {
  line(text);
  if (auto p = parse_ninja_progress(text)) progress(p->first, p->second);
}

CommandResult run_reported(Runner& runner, const Command& cmd, Reporter& reporter) {
  return runner.run(cmd, reporter.line_sink(), reporter.tick_sink());
}

std::optional<std::pair<long, long>> parse_ninja_progress(std::string_view line) {
  if (line.size() < 5 || line[0] != '[') return std::nullopt;
  std::size_t i = 1;
  auto number = [&](long& v) {
    std::size_t start = i;
    v = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - start < 12) v = v * 10 + (line[i++] - '0');
    return i > start;
  };
  long done = 0, total = 0;
  if (!number(done) || i >= line.size() || line[i++] != '/') return std::nullopt;
  if (!number(total) || i >= line.size() || line[i] != ']') return std::nullopt;
  if (total <= 0 || done > total) return std::nullopt;
  return std::make_pair(done, total);
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  long s = std::lround(seconds);
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

namespace {

// Estimated seconds left from the rate since the first progress seen in the stage.
std::optional<double> eta(double t_first, long done_first, double now, long done, long total) {
  if (t_first < 0 || done <= done_first || now - t_first < 1.0) return std::nullopt;
  double rate = static_cast<double>(done - done_first) / (now - t_first);
  return static_cast<double>(total - done) / rate;
}

std::string stage_label(const StageInfo& s) {
  if (s.index > 0 && s.count > 0) return fmt::format("[{}/{}] {}", s.index, s.count, s.name);
  return s.name;
}

std::string truncate(std::string_view s, std::size_t width) {
  if (s.size() <= width) return std::string(s);
  if (width <= 3) return std::string(s.substr(0, width));
  return std::string(s.substr(0, width - 3)) + "...";
}

}  // namespace

int terminal_width(int fd) {
  if (!isatty(fd)) return 0;
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// ---------------------------------------------------------------- TTY

TtyReporter::TtyReporter(std::ostream& out, int width, Clock clock)
    : out_(out), width_(width > 0 ? width : (terminal_width(2) > 0 ? terminal_width(2) : 80)),
      clock_(std::move(clock)) {}

TtyReporter::~TtyReporter() {
  clear();
  out_.flush();
}

void TtyReporter::clear() {
  if (drawn_) out_ << "\r\033[K";
  drawn_ = false;
}

void TtyReporter::redraw(bool force) {
  if (!in_stage_) return;
  double now = clock_();
  if (!force && last_draw_ >= 0 && now - last_draw_ < 0.1) return;
  last_draw_ = now;
  std::string s = stage_label(stage_) + "  ";
  std::string elapsed = format_duration(now - stage_t0_);
  if (total_ > 0) {
    const int bar = 20;
    int filled = static_cast<int>(bar * done_ / total_);
    s += "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(bar - filled), '-') + "] ";
    s += fmt::format("{}/{} {}%  {}", done_, total_, 100 * done_ / total_, elapsed);
    if (auto left = eta(first_progress_t_, first_progress_done_, now, done_, total_))
      s += "  ~" + format_duration(*left) + " left";
  } else {
    s += elapsed;
    if (!last_line_.empty()) s += "  " + last_line_;
  }
  out_ << "\r\033[K" << truncate(s, static_cast<std::size_t>(std::max(width_ - 1, 10)));
  out_.flush();
  drawn_ = true;
}

void TtyReporter::stage_started(const StageInfo& stage) {
  clear();
  stage_ = stage;
  in_stage_ = true;
  stage_t0_ = clock_();
  done_ = total_ = 0;
  first_progress_t_ = -1;
  last_line_.clear();
  last_draw_ = -1;
  redraw(true);
}

void TtyReporter::stage_finished(const StageInfo& stage, const StageEnd& end) {
  clear();
  in_stage_ = false;
  std::string s = stage_label(stage) + "  " + std::string(to_string(end.status));
  if (end.status != StageStatus::skipped) s += "  " + format_duration(end.seconds);
  if (!end.message.empty()) s += "  (" + end.message + ")";
  out_ << s << "\n";
  out_.flush();
}

void TtyReporter::line(std::string_view text) {
  if (parse_ninja_progress(text)) return;
  if (text.find_first_not_of(" \t") == std::string_view::npos) return;
  last_line_ = std::string(text);
  redraw(false);
}

void TtyReporter::progress(long done, long total) {
  if (first_progress_t_ < 0) {
    first_progress_t_ = clock_();
    first_progress_done_ = done;
  }
  done_ = done;
  total_ = total;
  redraw(done == total);
}

void TtyReporter::message(Level level, std::string_view text) {
  clear();
  const char* prefix = level == Level::warning ? "warning: " : level == Level::error ? "error: " : "";
  out_ << prefix << text << "\n";
  redraw(true);
}

void TtyReporter::tick() { redraw(false); }

// ---------------------------------------------------------------- plain

PlainReporter::PlainReporter(std::ostream& out, double interval, Clock clock)
    : out_(out), interval_(interval), clock_(std::move(clock)) {}

void PlainReporter::stage_started(const StageInfo& stage) {
  stage_ = stage;
  in_stage_ = true;
  stage_t0_ = last_print_ = clock_();
  done_ = total_ = 0;
  first_progress_t_ = -1;
  last_line_.clear();
  out_ << "archbuild: " << stage_label(stage) << ": started";
  if (!stage.detail.empty()) out_ << ": " << stage.detail;
  out_ << "\n";
  out_.flush();
}

void PlainReporter::stage_finished(const StageInfo& stage, const StageEnd& end) {
  in_stage_ = false;
  out_ << "archbuild: " << stage_label(stage) << ": " << to_string(end.status);
  if (end.status != StageStatus::skipped) out_ << " after " << format_duration(end.seconds);
  if (!end.message.empty()) out_ << " (" << end.message << ")";
  out_ << "\n";
  out_.flush();
}

void PlainReporter::line(std::string_view text) {
  if (parse_ninja_progress(text)) return;  // progress() follows and prints
  if (text.find_first_not_of(" \t") != std::string_view::npos) last_line_ = std::string(text.substr(0, 200));
  maybe_print();
}

void PlainReporter::progress(long done, long total) {
  if (first_progress_t_ < 0) {
    first_progress_t_ = clock_();
    first_progress_done_ = done;
  }
  done_ = done;
  total_ = total;
  maybe_print();
}

void PlainReporter::message(Level level, std::string_view text) {
  const char* prefix = level == Level::warning ? "warning: " : level == Level::error ? "error: " : "";
  out_ << "archbuild: " << prefix << text << "\n";
  out_.flush();
}

void PlainReporter::tick() { maybe_print(); }

void PlainReporter::maybe_print() {
  if (!in_stage_) return;
  double now = clock_();
  if (now - last_print_ < interval_) return;
  last_print_ = now;
  std::string s = "archbuild: " + stage_.name + ": ";
  if (total_ > 0) {
    s += fmt::format("{}/{} ({}%), {} elapsed", done_, total_, 100 * done_ / total_,
                     format_duration(now - stage_t0_));
    if (auto left = eta(first_progress_t_, first_progress_done_, now, done_, total_))
      s += ", ~" + format_duration(*left) + " left";
  } else {
    s += format_duration(now - stage_t0_) + " elapsed";
    if (!last_line_.empty()) s += ", last: " + last_line_;
  }
  out_ << s << "\n";
  out_.flush();
}

// ---------------------------------------------------------------- JSON

JsonReporter::JsonReporter(std::ostream& out, bool lines, Clock clock)
    : out_(out), lines_(lines), clock_(std::move(clock)), t0_(clock_()) {}

namespace {
void emit(std::ostream& out, const nlohmann::ordered_json& j) {
  out << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  out.flush();
}
double round3(double v) { return std::round(v * 1000) / 1000; }
}  // namespace

void JsonReporter::stage_started(const StageInfo& stage) {
  stage_ = stage.name;
  done_ = total_ = -1;
  nlohmann::ordered_json j{{"event", "stage_started"}, {"stage", stage.name}, {"t", round3(clock_() - t0_)}};
  if (stage.index > 0) j["index"] = stage.index;
  if (stage.count > 0) j["count"] = stage.count;
  if (!stage.detail.empty()) j["detail"] = stage.detail;
  emit(out_, j);
}

void JsonReporter::stage_finished(const StageInfo& stage, const StageEnd& end) {
  nlohmann::ordered_json j{{"event", "stage_finished"},
                   {"stage", stage.name},
                   {"status", std::string(to_string(end.status))},
                   {"seconds", round3(end.seconds)},
                   {"t", round3(clock_() - t0_)}};
  if (!end.message.empty()) j["message"] = end.message;
  if (!end.log.empty()) j["log"] = end.log.string();
  emit(out_, j);
}

void JsonReporter::line(std::string_view text) {
  if (!lines_) return;
  emit(out_, {{"event", "line"}, {"stage", stage_}, {"text", std::string(text)}});
}

void JsonReporter::progress(long done, long total) {
  if (done == done_ && total == total_) return;
  done_ = done;
  total_ = total;
  emit(out_, {{"event", "progress"}, {"stage", stage_}, {"done", done}, {"total", total},
              {"t", round3(clock_() - t0_)}});
}

void JsonReporter::message(Level level, std::string_view text) {
  const char* l = level == Level::warning ? "warning" : level == Level::error ? "error" : "info";
  emit(out_, {{"event", "message"}, {"level", l}, {"text", std::string(text)}});
}

// ---------------------------------------------------------------- choice

ReporterKind choose_reporter(ReporterKind wanted, bool json) {
  if (wanted != ReporterKind::automatic) return wanted;
  if (json) return ReporterKind::json;
  return isatty(2) ? ReporterKind::tty : ReporterKind::plain;
}

std::unique_ptr<Reporter> make_reporter(ReporterKind kind, std::ostream& out) {
  switch (choose_reporter(kind, false)) {
    case ReporterKind::tty: return std::make_unique<TtyReporter>(out);
    case ReporterKind::json: return std::make_unique<JsonReporter>(out);
    default: return std::make_unique<PlainReporter>(out);
  }
}

}  // namespace archbuild::run
