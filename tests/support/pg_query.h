// One-value queries for test assertions (counts, states), on a connection
// the test owns. A failed query, or a result that is not one row, fails the
// test; the value returned then (-1, "") never equals a meaningful one.
#pragma once

#include <cstdint>
#include <string>

#include "common/pg/connection.h"
#include "gtest/gtest.h"

namespace ulticode::testing {

inline int64_t QueryInt(pg::Connection& conn, const std::string& sql) {
  pg::Statement st{"test.query_int", sql.c_str(), absl::Seconds(30)};
  auto r = conn.Execute(st);
  EXPECT_TRUE(r.ok() && r->rows() == 1) << sql << ": " << r.status();
  return r.ok() && r->rows() == 1 ? r->GetInt64(0, 0) : -1;
}

inline std::string QueryText(pg::Connection& conn, const std::string& sql) {
  pg::Statement st{"test.query_text", sql.c_str(), absl::Seconds(30)};
  auto r = conn.Execute(st);
  EXPECT_TRUE(r.ok() && r->rows() == 1) << sql << ": " << r.status();
  return r.ok() && r->rows() == 1 ? r->GetString(0, 0) : "";
}

}  // namespace ulticode::testing
