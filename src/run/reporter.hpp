// How a run shows itself (ninja's Status idea): stages report through a Reporter, whatever the
// output is. Three kinds: a progress bar on a terminal (driven by ninja's "[N/M]" lines, with
// elapsed time and an estimate), plain periodic lines for CI logs, and JSON events (one object
// per line). All write to the stream they are given (stderr in archbuild: stdout is for results).
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "run/runner.hpp"

namespace archbuild::run {

struct StageInfo {
  std::string name;     // "fetch", "configure", "build", "package", …
  int index = 0;        // 1-based position among `count` stages (0: not numbered)
  int count = 0;
  std::string detail;   // what it does, e.g. the command line; may be empty
};

enum class StageStatus {
  ok,
  failed,
  interrupted,
  skipped,  // done by an earlier run (stamp) or not needed (cached wheel)
};
std::string_view to_string(StageStatus s);

struct StageEnd {
  StageStatus status = StageStatus::ok;
  double seconds = 0;
  std::string message;           // "exit status 2", "cached", …
  std::filesystem::path log;     // the stage's log, if any
};

enum class Level { info, warning, error };

// Seconds on a monotonic clock; tests pass a fake one.
using Clock = std::function<double()>;
Clock steady_clock_seconds();

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void stage_started(const StageInfo& stage) = 0;
  virtual void stage_finished(const StageInfo& stage, const StageEnd& end) = 0;
  virtual void line(std::string_view text) = 0;         // one output line of the running stage
  virtual void progress(long done, long total) = 0;      // steps of the running stage
  virtual void message(Level level, std::string_view text) = 0;
  virtual void tick() {}  // time passes (no output): lets periodic kinds print
  // Feeds one output line of a command: line(), and progress() for ninja's "[N/M] …".
  void output(std::string_view text);
  // For Runner::run: output() and tick() of this reporter.
  LineCallback line_sink() { return [this](std::string_view l) { output(l); }; }
  TickCallback tick_sink() { return [this] { tick(); }; }
};

// runner.run(cmd, …) with its output and ticks going to the reporter.
CommandResult run_reported(Runner& runner, const Command& cmd, Reporter& reporter);

// ninja's default status "[N/M] …" (NINJA_STATUS="[%f/%t] "): {N, M}.
std::optional<std::pair<long, long>> parse_ninja_progress(std::string_view line);

// "45s", "3m05s", "1h02m".
std::string format_duration(double seconds);

// The terminal kind: one status line redrawn in place ("\r" + erase), at most every 100 ms.
class TtyReporter : public Reporter {
 public:
  TtyReporter(std::ostream& out, int width = 0 /* 0: ask the terminal on stderr, else 80 */,
              Clock clock = steady_clock_seconds());
  ~TtyReporter() override;
  void stage_started(const StageInfo& stage) override;
  void stage_finished(const StageInfo& stage, const StageEnd& end) override;
  void line(std::string_view text) override;
  void progress(long done, long total) override;
  void message(Level level, std::string_view text) override;
  void tick() override;

 private:
  void redraw(bool force);
  void clear();
  std::ostream& out_;
  int width_;
  Clock clock_;
  StageInfo stage_;
  bool in_stage_ = false;
  bool drawn_ = false;
  double stage_t0_ = 0, last_draw_ = -1;
  long done_ = 0, total_ = 0;
  double first_progress_t_ = -1;
  long first_progress_done_ = 0;
  std::string last_line_;
};

// The CI kind: a line when a stage starts and ends, and a progress line at most every
// `interval` seconds while it runs (nothing else: the full output is in the stage's log).
class PlainReporter : public Reporter {
 public:
  PlainReporter(std::ostream& out, double interval = 30, Clock clock = steady_clock_seconds());
  void stage_started(const StageInfo& stage) override;
  void stage_finished(const StageInfo& stage, const StageEnd& end) override;
  void line(std::string_view text) override;
  void progress(long done, long total) override;
  void message(Level level, std::string_view text) override;
  void tick() override;

 private:
  void maybe_print();
  std::ostream& out_;
  double interval_;
  Clock clock_;
  StageInfo stage_;
  bool in_stage_ = false;
  double stage_t0_ = 0, last_print_ = 0;
  long done_ = 0, total_ = 0;
  double first_progress_t_ = -1;
  long first_progress_done_ = 0;
  std::string last_line_;
};

// The machine kind: {"event": "stage_started"|"stage_finished"|"progress"|"message"|"line", …}
// one JSON object per line; "t" is seconds since the reporter was made. Output lines are only
// sent with `lines` (they are in the log anyway).
class JsonReporter : public Reporter {
 public:
  JsonReporter(std::ostream& out, bool lines = false, Clock clock = steady_clock_seconds());
  void stage_started(const StageInfo& stage) override;
  void stage_finished(const StageInfo& stage, const StageEnd& end) override;
  void line(std::string_view text) override;
  void progress(long done, long total) override;
  void message(Level level, std::string_view text) override;

 private:
  std::ostream& out_;
  bool lines_;
  Clock clock_;
  double t0_;
  std::string stage_;
  long done_ = -1, total_ = -1;
};

enum class ReporterKind { automatic, tty, plain, json };
// automatic: json when `json`, a terminal on stderr → tty, else plain.
ReporterKind choose_reporter(ReporterKind wanted, bool json);
std::unique_ptr<Reporter> make_reporter(ReporterKind kind, std::ostream& out);

// Columns of the terminal on `fd`, or 0 when it is not a terminal.
int terminal_width(int fd);

}  // namespace archbuild::run
