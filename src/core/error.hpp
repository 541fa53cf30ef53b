// Errors as values, one message style, each carrying the exit status docs/commands.md documents.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace archbuild {

// Exit statuses shared by every command (docs/commands.md "Every command").
enum class Exit : int {
  ok = 0,
  not_fine = 1,     // the thing checked is not fine (coverage gap, doctor finding, no match)
  bad_input = 2,    // bad usage or bad input
  missing_tool = 3, // a needed tool or device is missing
  build_failed = 4, // a build stage failed
  internal = 70,    // archbuild's own fault (an exception no rule turned into an Error): report it.
                    // 70 is sysexits.h's EX_SOFTWARE, so it cannot be read as any input's fault.
};

struct Error {
  Exit exit = Exit::bad_input;
  std::string message;  // one line: what, where, and what would be valid

  static Error bad_input(std::string m) { return {Exit::bad_input, std::move(m)}; }
  static Error missing_tool(std::string m) { return {Exit::missing_tool, std::move(m)}; }
  static Error not_fine(std::string m) { return {Exit::not_fine, std::move(m)}; }
  static Error build_failed(std::string m) { return {Exit::build_failed, std::move(m)}; }
};

// Thrown only to cross layers that cannot return a Result (CLI11 callbacks); main() turns it
// into the message and exit status.
struct Failure : std::runtime_error {
  Error error;
  explicit Failure(Error e) : std::runtime_error(e.message), error(std::move(e)) {}
};

// The value of a Result that carries nothing but success (Result<void> cannot hold a variant).
struct Ok {};

// Minimal expected<T, Error> (C++20 has no std::expected).
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT(implicit)
  Result(Error error) : v_(std::move(error)) {}      // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

  // The value, or throw Failure (for CLI code where the error ends the command).
  T take() && {
    if (!ok()) throw Failure(std::get<1>(v_));
    return std::get<0>(std::move(v_));
  }

 private:
  void check() const {
    if (!ok()) throw Failure(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

}  // namespace archbuild
