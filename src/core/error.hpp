// Errors as values, one message style, each carrying the exit status docs/commands.md documents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

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

// What an Error is, where a caller decides by it: callers branch on this, never on the words.
enum class ErrorKind : std::uint8_t {
  general,       // no caller decides by it
  missing_key,   // a document lacks a key it must have (a recipe: set it here or in its base)
  cannot_start,  // a program could not be started (run::capture; its context is the program)
};

struct Error {
  Exit exit = Exit::bad_input;
  std::string message;  // one line: its context, then what, where, and what would be valid
  ErrorKind kind = ErrorKind::general;
  // What was being done when it happened, outermost first ("--sm", "/usr/bin/python3"). Each is
  // in front of `message` as "CONTEXT: ", so the line reads as one; reason() is the rest.
  std::vector<std::string> context;
  std::size_t context_chars = 0;  // how much of `message` its context takes

  static Error bad_input(std::string m) { return {Exit::bad_input, std::move(m)}; }
  static Error missing_tool(std::string m) { return {Exit::missing_tool, std::move(m)}; }
  static Error not_fine(std::string m) { return {Exit::not_fine, std::move(m)}; }
  static Error build_failed(std::string m) { return {Exit::build_failed, std::move(m)}; }

  // The same error, said while doing `what`: "WHAT: " goes in front of the message.
  Error with_context(std::string what) && {
    message = what + ": " + message;
    context_chars += what.size() + 2;
    context.insert(context.begin(), std::move(what));
    return std::move(*this);
  }
  Error with_context(std::string what) const& { return Error(*this).with_context(std::move(what)); }
  Error with_kind(ErrorKind k) && {
    kind = k;
    return std::move(*this);
  }
  // The message without its context: what went wrong, in the words of where it happened.
  std::string reason() const { return context_chars <= message.size() ? message.substr(context_chars) : message; }
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
