// Small helpers for absl::Status plumbing; this abseil release ships none.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ULTI_CONCAT_INNER_(a, b) a##b
#define ULTI_CONCAT_(a, b) ULTI_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` yields a non-OK status.
#define RETURN_IF_ERROR(expr)                    \
  do {                                           \
    ::absl::Status ulti_status_ = (expr);        \
    if (!ulti_status_.ok()) return ulti_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, F())` declares x from a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ULTI_ASSIGN_OR_RETURN_IMPL_(ULTI_CONCAT_(ulti_statusor_, __LINE__), lhs, expr)
#define ULTI_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()
