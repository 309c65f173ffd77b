//===- Status.h - Errors with context for the runtime -----------*- C++ -*-===//
//
// The runtime reports every failure as a Status carrying a message that
// names what failed (file, tensor, kernel, limit) and the values involved.
// No exceptions, no aborts on user input.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_SUPPORT_STATUS_H
#define DAYBREAK_RUNTIME_SUPPORT_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace daybreak {

class [[nodiscard]] Status {
public:
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.text = std::move(message);
    return s;
  }
  bool ok() const { return !failed; }
  explicit operator bool() const { return !failed; }
  const std::string &message() const { return text; }
  /// Prefixes context: "loading model.daybreak: <message>".
  Status withContext(const std::string &context) const {
    return failed ? error(context + ": " + text) : success();
  }

private:
  bool failed = false;
  std::string text;
};

/// A value or the Status explaining why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value(std::move(value)) {}
  StatusOr(Status status) : status(std::move(status)) {}
  bool ok() const { return value.has_value(); }
  const Status &error() const { return status; }
  T &operator*() { return *value; }
  const T &operator*() const { return *value; }
  T *operator->() { return &*value; }
  const T *operator->() const { return &*value; }

private:
  std::optional<T> value;
  Status status;
};

} // namespace daybreak

/// Returns the Status of `expr` from the enclosing function if it failed.
#define DAYBREAK_RETURN_IF_ERROR(expr)                                         \
  do {                                                                         \
    ::daybreak::Status daybreakStatus_ = (expr);                               \
    if (!daybreakStatus_.ok())                                                 \
      return daybreakStatus_;                                                  \
  } while (false)

#endif // DAYBREAK_RUNTIME_SUPPORT_STATUS_H
