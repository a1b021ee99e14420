// Page tokens of the audit query API: round trips, and every way a token from
// a client can be wrong.
#include "admin/query/page_token.h"

#include "absl/strings/escaping.h"
#include "admin/query/list_token.h"
#include "gtest/gtest.h"

namespace ulticode::admin::query {
namespace {

AuditFilters SomeFilters() {
  AuditFilters f;
  f.owner = "auth";
  f.actor = "alice";
  f.entity_type = "user";
  f.entity_id = "u-1";
  f.start_time = absl::FromUnixMicros(1'700'000'000'000'001);
  return f;
}

AuditFilters ActorAction(std::string actor, std::string action) {
  AuditFilters f;
  f.actor = std::move(actor);
  f.action = std::move(action);
  return f;
}

PageCursor SomeCursor() {
  return {absl::FromUnixMicros(1'796'000'000'123'456), "0190f3a1-7c2e-7abc-8def-0123456789ab"};
}

void ExpectMalformed(const absl::StatusOr<PageCursor>& r) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "page_token: malformed");
}

TEST(PageTokenTest, RoundTripsCursorForTheSameFilters) {
  const uint64_t fp = FilterFingerprint(SomeFilters());
  auto token = EncodePageToken(SomeCursor(), fp);
  ASSERT_TRUE(token.ok()) << token.status();
  // URL- and header-safe: base64url without padding.
  EXPECT_EQ(
      token->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
      std::string::npos);
  auto back = DecodePageToken(*token, fp);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, SomeCursor());
}

TEST(PageTokenTest, UppercaseEventIdComesBackCanonical) {
  PageCursor c = SomeCursor();
  c.event_id = "0190F3A1-7C2E-7ABC-8DEF-0123456789AB";
  auto token = EncodePageToken(c, 7);
  ASSERT_TRUE(token.ok());
  auto back = DecodePageToken(*token, 7);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->event_id, SomeCursor().event_id);
}

TEST(PageTokenTest, ExtremeTimesRoundTrip) {
  for (absl::Time t :
       {absl::FromUnixSeconds(-62135596800), absl::UnixEpoch(), absl::FromUnixMicros(-1),
        absl::FromUnixSeconds(253402300799) + absl::Microseconds(999999)}) {
    PageCursor c{t, SomeCursor().event_id};
    auto token = EncodePageToken(c, 1);
    ASSERT_TRUE(token.ok()) << t;
    auto back = DecodePageToken(*token, 1);
    ASSERT_TRUE(back.ok()) << t;
    EXPECT_EQ(back->occurred_at, t);
  }
}

TEST(PageTokenTest, EncodeRefusesWhatNoRowCanHold) {
  EXPECT_FALSE(EncodePageToken({absl::UnixEpoch(), "not-a-uuid"}, 1).ok());
  EXPECT_FALSE(EncodePageToken({absl::InfiniteFuture(), SomeCursor().event_id}, 1).ok());
  EXPECT_FALSE(EncodePageToken({absl::InfinitePast(), SomeCursor().event_id}, 1).ok());
}

TEST(PageTokenTest, GarbageIsMalformed) {
  ExpectMalformed(DecodePageToken("", 1));
  ExpectMalformed(DecodePageToken("hello world!", 1));
  ExpectMalformed(DecodePageToken("%%%%", 1));
  ExpectMalformed(DecodePageToken(absl::WebSafeBase64Escape("just some bytes"), 1));
  ExpectMalformed(DecodePageToken(std::string(200, 'A'), 1));
}

TEST(PageTokenTest, TruncatedOrExtendedIsMalformed) {
  auto token = EncodePageToken(SomeCursor(), 42);
  ASSERT_TRUE(token.ok());
  for (size_t len = 1; len < token->size(); ++len) {
    ExpectMalformed(DecodePageToken(token->substr(0, len), 42));
  }
  ExpectMalformed(DecodePageToken(*token + "AAAA", 42));
}

TEST(PageTokenTest, AnyTamperedByteIsMalformed) {
  auto token = EncodePageToken(SomeCursor(), 42);
  ASSERT_TRUE(token.ok());
  std::string payload;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(*token, &payload));
  for (size_t i = 0; i < payload.size(); ++i) {
    std::string bad = payload;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    ExpectMalformed(DecodePageToken(absl::WebSafeBase64Escape(bad), 42));
  }
}

TEST(PageTokenTest, UnknownVersionIsMalformed) {
  auto token = EncodePageToken(SomeCursor(), 42);
  ASSERT_TRUE(token.ok());
  std::string payload;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(*token, &payload));
  payload[0] = 2;
  // Even with a consistent checksum, an unknown version is refused.
  const uint64_t sum = Fnv1a64(absl::string_view(payload).substr(0, payload.size() - 8));
  for (int i = 0; i < 8; ++i) {
    payload[payload.size() - 8 + i] = static_cast<char>(sum >> (56 - 8 * i));
  }
  ExpectMalformed(DecodePageToken(absl::WebSafeBase64Escape(payload), 42));
}

TEST(PageTokenTest, DifferentFiltersAreRefused) {
  const AuditFilters base = SomeFilters();
  auto token = EncodePageToken(SomeCursor(), FilterFingerprint(base));
  ASSERT_TRUE(token.ok());
  std::vector<AuditFilters> others(9, base);
  others[0].owner = "app";
  others[1].actor = "bob";
  others[2].action = "create_user";
  others[3].entity_type = "";
  others[4].entity_id = "u-2";
  others[5].start_time = std::nullopt;
  others[6].start_time = *base.start_time + absl::Microseconds(1);
  others[7].end_time = absl::FromUnixSeconds(1'800'000'000);
  others[8] = AuditFilters{};
  for (size_t i = 0; i < others.size(); ++i) {
    auto r = DecodePageToken(*token, FilterFingerprint(others[i]));
    ASSERT_FALSE(r.ok()) << i;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "page_token: issued for a different filter") << i;
  }
}

TEST(PageTokenTest, FingerprintIsStableAndUnambiguous) {
  // Pinned: tokens must stay valid across processes, replicas and releases.
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(FilterFingerprint(SomeFilters()), FilterFingerprint(SomeFilters()));
  // Field boundaries matter: moving a character between fields changes it.
  EXPECT_NE(FilterFingerprint(ActorAction("ab", "c")), FilterFingerprint(ActorAction("a", "bc")));
  // A filter on the epoch is not "no filter".
  AuditFilters epoch;
  epoch.start_time = absl::UnixEpoch();
  EXPECT_NE(FilterFingerprint(epoch), FilterFingerprint(AuditFilters{}));
  // start_time and end_time are not interchangeable.
  AuditFilters from, to;
  from.start_time = absl::UnixEpoch();
  to.end_time = absl::UnixEpoch();
  EXPECT_NE(FilterFingerprint(from), FilterFingerprint(to));
}

// The numbered lists' tokens: a position, good only for the list and the
// request fingerprint it was issued for, in one spelling.
TEST(ListTokenTest, ATokenHoldsItsPositionForItsListAndRequestOnly) {
  for (uint64_t position : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40, ~uint64_t{0}}) {
    const std::string token = EncodeListToken(ListKind::kPoison, position, 7);
    auto decoded = DecodeListToken("page_token", token, ListKind::kPoison, 7);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, position);
    for (auto [kind, fingerprint] : {std::pair{ListKind::kDeadInbox, uint64_t{7}},
                                     std::pair{ListKind::kPoison, uint64_t{8}}}) {
      auto other = DecodeListToken("page_token", token, kind, fingerprint);
      EXPECT_EQ(other.status().message(), "page_token: issued for another request");
    }
  }
  const std::string token = EncodeListToken(ListKind::kWatch, 5, 0);
  std::string raw;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(token, &raw));
  for (const std::string& bad :
       {std::string(""), token.substr(1), token + "A", token + "=", std::string("!!"),
        absl::WebSafeBase64Escape(raw.substr(0, raw.size() - 1))}) {
    auto r = DecodeListToken("resume_token", bad, ListKind::kWatch, 0);
    EXPECT_EQ(r.status().message(), "resume_token: malformed") << bad;
  }
  // A flipped bit anywhere fails the checksum.
  for (size_t i = 0; i < raw.size(); ++i) {
    std::string flipped = raw;
    flipped[i] ^= 0x10;
    EXPECT_FALSE(
        DecodeListToken("page_token", absl::WebSafeBase64Escape(flipped), ListKind::kWatch, 0).ok())
        << i;
  }
}

}  // namespace
}  // namespace ulticode::admin::query
