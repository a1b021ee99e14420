// An owned query result (PGresult freed by PQclear). Values are read in text
// format; typed getters parse them. Move-only; safe to use from any thread
// once produced, but not concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "libpq-fe.h"

namespace ulticode::pg {

class Result {
 public:
  Result() = default;
  explicit Result(PGresult* res) : res_(res) {}

  // Whether a PGresult is held (a default-constructed or moved-from Result
  // holds none and reads as zero rows).
  explicit operator bool() const { return res_ != nullptr; }
  // The held result, still owned by this Result (null when none).
  const PGresult* get() const { return res_.get(); }
  // PQresultStatus; PGRES_FATAL_ERROR when no result is held.
  ExecStatusType status() const { return PQresultStatus(res_.get()); }

  int rows() const { return res_ ? PQntuples(res_.get()) : 0; }
  int columns() const { return res_ ? PQnfields(res_.get()) : 0; }
  bool empty() const { return rows() == 0; }
  // Rows affected by INSERT/UPDATE/DELETE (PQcmdTuples).
  int64_t affected_rows() const;
  // The command tag ("INSERT 0 1", "COMMIT", "ROLLBACK", ...).
  absl::string_view command_status() const { return res_ ? PQcmdStatus(res_.get()) : ""; }
  // Column index by name, -1 when absent.
  int Column(absl::string_view name) const;

  bool IsNull(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }
  // Text value ("" for NULL). Valid while this Result lives.
  absl::string_view Get(int row, int col) const;
  std::string GetString(int row, int col) const { return std::string(Get(row, col)); }
  int64_t GetInt64(int row, int col) const;  // 0 for NULL
  double GetDouble(int row, int col) const;  // 0 for NULL
  bool GetBool(int row, int col) const;      // false for NULL
  // Decodes a bytea column (hex text format).
  std::string GetBytes(int row, int col) const;
  // Parses a timestamptz (the session runs in UTC). InfinitePast for NULL.
  absl::Time GetTime(int row, int col) const;

 private:
  struct Deleter {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Deleter> res_;
};

}  // namespace ulticode::pg
