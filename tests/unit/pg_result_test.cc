// pg::Result owns its PGresult: it frees it exactly once, a move hands the
// ownership over, and an empty Result reads as no rows and an error status.
// Connection::Run relies on this to hold every result it reads.
#include <utility>

#include "common/pg/result.h"
#include "gtest/gtest.h"
#include "libpq-fe.h"

namespace ulticode::pg {
namespace {

TEST(PgResultTest, EmptyResultHoldsNothing) {
  const Result r;
  EXPECT_FALSE(r);
  EXPECT_EQ(r.get(), nullptr);
  EXPECT_EQ(r.status(), PGRES_FATAL_ERROR);
  EXPECT_EQ(r.rows(), 0);
  EXPECT_EQ(r.command_status(), "");
}

TEST(PgResultTest, HoldsTheResultItWasGiven) {
  PGresult* raw = PQmakeEmptyPGresult(nullptr, PGRES_COMMAND_OK);
  ASSERT_NE(raw, nullptr);
  const Result r(raw);
  EXPECT_TRUE(r);
  EXPECT_EQ(r.get(), raw);
  EXPECT_EQ(r.status(), PGRES_COMMAND_OK);
  EXPECT_EQ(r.rows(), 0);
}

TEST(PgResultTest, MoveHandsOwnershipOver) {
  PGresult* first = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  PGresult* second = PQmakeEmptyPGresult(nullptr, PGRES_FATAL_ERROR);
  Result a(first);
  Result b(second);
  // Assigning over a held result frees the old one (second) and takes first.
  b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.get(), first);
  EXPECT_EQ(b.status(), PGRES_TUPLES_OK);
  Result c(std::move(b));
  EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.get(), first);
}

}  // namespace
}  // namespace ulticode::pg
