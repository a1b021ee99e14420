#include "common/pg/result.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ulticode::pg {

int64_t Result::affected_rows() const {
  if (!res_) return 0;
  int64_t n = 0;
  (void)absl::SimpleAtoi(PQcmdTuples(res_.get()), &n);
  return n;
}

int Result::Column(absl::string_view name) const {
  for (int i = 0; i < columns(); ++i) {
    if (name == PQfname(res_.get(), i)) return i;
  }
  return -1;
}

absl::string_view Result::Get(int row, int col) const {
  return absl::string_view(PQgetvalue(res_.get(), row, col),
                           static_cast<size_t>(PQgetlength(res_.get(), row, col)));
}

int64_t Result::GetInt64(int row, int col) const {
  int64_t v = 0;
  if (!IsNull(row, col)) (void)absl::SimpleAtoi(Get(row, col), &v);
  return v;
}

double Result::GetDouble(int row, int col) const {
  double v = 0;
  if (!IsNull(row, col)) (void)absl::SimpleAtod(Get(row, col), &v);
  return v;
}

bool Result::GetBool(int row, int col) const { return !IsNull(row, col) && Get(row, col) == "t"; }

std::string Result::GetBytes(int row, int col) const {
  if (IsNull(row, col)) return "";
  size_t len = 0;
  unsigned char* raw = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(res_.get(), row, col)), &len);
  if (raw == nullptr) return "";
  std::string out(reinterpret_cast<char*>(raw), len);
  PQfreemem(raw);
  return out;
}

absl::Time Result::GetTime(int row, int col) const {
  if (IsNull(row, col)) return absl::InfinitePast();
  // PostgreSQL prints "2026-11-30 05:47:32.123456+00" in a UTC session.
  std::string text(Get(row, col));
  if (text == "infinity") return absl::InfiniteFuture();
  if (text == "-infinity") return absl::InfinitePast();
  auto plus = text.find_last_of("+-");
  if (plus != std::string::npos && plus > 10 && text.size() - plus == 3) text += ":00";
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d %H:%M:%E*S%Ez", text, &t, &err)) return absl::InfinitePast();
  return t;
}

}  // namespace ulticode::pg
