// Errors cross module boundaries as values. An Error carries the exit-code class and a
// message that already names the file and JSON path or layer, ready to print.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace pulse {

/// What kind of failure, which decides the process exit code (see README "Exit codes").
enum class ErrorKind {
  usage,       ///< Bad command line: exit 2.
  input,       ///< Bad input file: exit 2.
  infeasible,  ///< Inputs fine, but no plan fits: exit 1.
  internal,    ///< A bug or an environment failure (write error): exit 3.
};

struct Error {
  ErrorKind kind = ErrorKind::internal;
  std::string message;
};

/// Exit code for an error kind: 1 infeasible, 2 usage/input, 3 internal.
int exit_code(ErrorKind kind);

/// A value or an Error. Small on purpose: C++20 has no std::expected.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}
  Result(Error error) : state_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

/// Result of an operation with no value.
struct Ok {};
using Status = Result<Ok>;

inline Error usage_error(std::string message) {
  return {ErrorKind::usage, std::move(message)};
}
inline Error input_error(std::string message) {
  return {ErrorKind::input, std::move(message)};
}
inline Error infeasible_error(std::string message) {
  return {ErrorKind::infeasible, std::move(message)};
}
inline Error internal_error(std::string message) {
  return {ErrorKind::internal, std::move(message)};
}

}  // namespace pulse
