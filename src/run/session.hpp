// What a killed archbuild leaves running in a build tree, found and ended by the next run.
//
// Why a record and not only PDEATHSIG: PR_SET_PDEATHSIG reaches the direct child alone (and
// fires when the forking *thread* dies), and ninja starts every compile in a process group of
// its own, so after a kill -9 of archbuild (the OOM killer, a CI timeout) nvcc and cicc go on
// writing into the tree while the next run configures or compiles the same files. A subreaper
// does not help either: it dies with archbuild. So each command that works in a build tree runs
// as the leader of a new session, with a random token in its environment, and the runner records
// {leader pid, its start time, the boot id, the token} in a file under the key's lock. The next
// run, holding that lock and before touching the tree, kills what the record names and waits
// until it is gone.
//
// A process is the old run's when it started no earlier than the recorded leader and either
// carries the token in its environment (inherited by every descendant, also one that left the
// session with setsid), or belongs to the recorded session while the recorded leader (same pid,
// same start time, the token in its own environment) is still alive. A pid or session number
// reused by an unrelated process fails both tests, and so does a record made by hand naming a
// live session leader of someone else's (its environment lacks the token), so nothing else of
// the user's is touched. Not covered: a descendant that both
// scrubbed its environment and outlived the leader.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace archbuild::run {

// The variable that carries the token into the command's environment.
inline constexpr const char* kSessionTokenVar = "ARCHBUILD_SESSION_TOKEN";

struct SessionRecord {
  long pid = 0;                 // the session's leader (0: recorded before the start)
  unsigned long long start = 0;  // its start time (/proc/<pid>/stat field 22, clock ticks after boot)
  std::string boot_id;           // /proc/sys/kernel/random/boot_id: a record from before a reboot names nothing
  std::string token;             // 32 random hex digits
};

std::string new_session_token();
std::string current_boot_id();
// Start time of a running process (field 22 of /proc/<pid>/stat); nullopt when it is gone.
std::optional<unsigned long long> process_start_time(long pid);

// Written whole (a temporary file renamed over it); false when it cannot be written.
bool write_session_record(const std::filesystem::path& file, const SessionRecord& record);
std::optional<SessionRecord> read_session_record(const std::filesystem::path& file);

// The processes of a recorded session still running (zombies are not: they run nothing).
std::vector<pid_t> session_processes(const SessionRecord& record);

// Sends `sig` to every process of the session (the leader included); the number signalled.
std::size_t signal_session(const SessionRecord& record, int sig);

// Ends what the run that wrote `file` left running: SIGKILL to each of its processes, then
// waits until none is left (at most `timeout`), then removes the record. `on_ending` is told
// once, before the kill, which processes these are. An error (exit 4) when some survive the
// timeout: the tree is not safe to touch.
Result<std::size_t> end_stale_session(const std::filesystem::path& file,
                                      const std::function<void(const std::string& message)>& on_ending = {},
                                      std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace archbuild::run
