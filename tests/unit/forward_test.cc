// The forwarder's pure parts (docs/forwarding.md): the webhook signature
// (a value Python's hmac computes), URLs in logs without their secrets,
// RFC 5424 messages of generated rows read back by an independent parser
// (every header field one token, every SD-PARAM value unescaping to the
// row's, the JSON after a BOM), and --sinks-file refusals that name the
// sink and the field.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/crypto/crypto.h"
#include "forward/sinks_config.h"
#include "forward/syslog.h"
#include "forward/webhook.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace ulticode::forward {
namespace {

TEST(WebhookTest, TheSignatureIsHmacSha256OfTimestampDotBody) {
  // python3: hmac.new(b"key-1", b"1700000000." + body, hashlib.sha256)
  EXPECT_EQ(WebhookSignature("key-1", "1700000000", "{\"log_index\":0}\n"),
            "v1=a522aacd1a0e34e0647af9779b617046ea5276714d254592826e5be08254a205");
  EXPECT_NE(WebhookSignature("key-1", "1700000001", "{\"log_index\":0}\n"),
            WebhookSignature("key-1", "1700000000", "{\"log_index\":0}\n"));
}

TEST(WebhookTest, LogsNameOnlyTheSchemeHostAndPort) {
  EXPECT_EQ(UrlForLogs("https://user:pw@siem.example:8443/hook/T0KEN?token=s3cret#x"),
            "https://siem.example:8443");
  EXPECT_EQ(UrlForLogs("http://127.0.0.1:9/a"), "http://127.0.0.1:9");
  EXPECT_EQ(UrlForLogs("http://h?k=s3cret"), "http://h");
  EXPECT_EQ(UrlForLogs("s3cret"), "(not a URL)");
}

// An RFC 5424 message split the way a receiver reads it.
struct Parsed {
  std::vector<std::string> header;  // PRI+VERSION, TIMESTAMP, HOSTNAME, APP, PROCID, MSGID
  std::vector<std::pair<std::string, std::string>> params;  // unescaped
  std::string msg;
};

Parsed Parse(const std::string& m) {
  Parsed p;
  size_t at = 0;
  for (int i = 0; i < 6; ++i) {
    const size_t space = m.find(' ', at);
    p.header.push_back(m.substr(at, space - at));
    at = space + 1;
  }
  EXPECT_EQ(m[at], '[') << m;
  const size_t id_end = m.find(' ', at);
  EXPECT_EQ(m.substr(at + 1, id_end - at - 1), "ulticode@32473");
  at = id_end;
  while (m[at] == ' ') {
    const size_t eq = m.find('=', at);
    std::string name = m.substr(at + 1, eq - at - 1), value;
    EXPECT_EQ(m[eq + 1], '"') << m;
    size_t i = eq + 2;
    for (; m[i] != '"'; ++i) {
      if (m[i] == '\\' && (m[i + 1] == '"' || m[i + 1] == '\\' || m[i + 1] == ']')) {
        value += m[++i];
        continue;
      }
      EXPECT_NE(m[i], ']') << "an unescaped ] ends the element early: " << m;
      value += m[i];
    }
    p.params.emplace_back(std::move(name), std::move(value));
    at = i + 1;
  }
  EXPECT_EQ(m.substr(at, 2), "] ") << m;
  p.msg = m.substr(at + 2);
  return p;
}

TEST(SyslogTest, GeneratedRowsReadBackFieldForField) {
  const uint32_t seed = testing::SeedFromEnv("ULTICODE_SYSLOG_SEED", "syslog messages");
  std::mt19937 rng(seed);
  const std::string alphabet = "ab Z9\"\\]=[-_.@\xC3\xA9\t";
  auto text = [&](int max) {
    std::string s;
    for (int n = std::uniform_int_distribution<int>(0, max)(rng); n > 0; --n) {
      s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    }
    return s;
  };
  for (int i = 0; i < 500; ++i) {
    Row row;
    row.log.set_event_id(text(40));
    row.log.set_log_index(rng());
    row.log.set_owner(i % 2 ? audit::v1::OWNER_AUTH : audit::v1::OWNER_APP);
    row.log.set_action(text(20));
    row.log.set_actor(text(20));
    row.log.set_event_type(text(40));
    row.log.mutable_occurred_at()->set_seconds(1700000000 + i);
    row.json = "{\"log_index\":1}";
    const std::string host = text(10);
    const Parsed p = Parse(SyslogMessage(row, host));
    ASSERT_EQ(p.header.size(), 6u);
    EXPECT_EQ(p.header[0], "<109>1");
    for (const std::string& field : p.header) {
      EXPECT_FALSE(field.empty());
      for (char c : field) EXPECT_TRUE(c > 32 && c < 127) << "seed " << seed << ": " << field;
    }
    EXPECT_EQ(p.header[3], "ulticode-forward");
    EXPECT_EQ(p.header[4], "-");
    const std::vector<std::pair<std::string, std::string>> want = {
        {"event_id", row.log.event_id()},
        {"log_index", absl::StrCat(row.log.log_index())},
        {"owner", audit::v1::Owner_Name(row.log.owner())},
        {"action", row.log.action()},
        {"actor", row.log.actor()}};
    EXPECT_EQ(p.params, want) << "seed " << seed;
    EXPECT_EQ(p.msg, "\xEF\xBB\xBF" + row.json);
  }
}

class SinksFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir();
    secret_ = dir_ + "/hook.secret";
    ASSERT_TRUE(crypto::WriteSecretFile(secret_, "k").ok());
  }
  std::string Hook(const std::string& name, const std::string& extra = "") {
    return absl::StrCat("{\"name\":\"", name,
                        "\",\"webhook\":{\"url\":\"https://siem.example/x\","
                        "\"secretFile\":\"",
                        secret_, "\"", extra, "}}");
  }
  std::string dir_, secret_;
};

TEST_F(SinksFileTest, AGoodFileGivesEachSinkItsSettings) {
  auto plans = SinksOf(absl::StrCat(
      "{\"sinks\":[", Hook("a", ",\"schema\":\"SCHEMA_OCSF\",\"maxBatchRows\":7"),
      ",{\"name\":\"b-2\",\"filter\":{\"owner\":\"OWNER_APP\"},\"syslog\":{\"address\":"
      "\"collector.example:6514\",\"tls\":true}}]}"));
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[0].schema, exports::Format::kOcsf);
  EXPECT_EQ((*plans)[0].max_batch_rows, 7u);
  EXPECT_EQ((*plans)[1].name, "b-2");
  EXPECT_EQ((*plans)[1].filter.owner(), audit::v1::OWNER_APP);
  EXPECT_EQ((*plans)[1].max_batch_rows, 100u);
}

TEST_F(SinksFileTest, EachBadSettingIsRefusedNamingItsSinkAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"sinks\":[]}", "no sinks"},
      {"{\"sinks\":[{\"name\":\"a\",\"colour\":1}]}", "colour"},
      {absl::StrCat("{\"sinks\":[", Hook(""), "]}"), "sink name \"\""},
      {absl::StrCat("{\"sinks\":[", Hook("Upper"), "]}"), "sink name \"Upper\""},
      {absl::StrCat("{\"sinks\":[", Hook(std::string(64, 'a')), "]}"), "1..63"},
      {absl::StrCat("{\"sinks\":[", Hook("a"), ",", Hook("a"), "]}"), "\"a\": named twice"},
      {"{\"sinks\":[{\"name\":\"a\"}]}", "\"a\": needs a destination"},
      {"{\"sinks\":[{\"name\":\"a\",\"webhook\":{\"url\":\"ftp://x/?t=s3cret\",\"secretFile\":\"" +
           secret_ + "\"}}]}",
       "\"a\": webhook.url: ftp://x is not http(s)://"},
      {"{\"sinks\":[{\"name\":\"a\",\"webhook\":{\"url\":\"https://x/\"}}]}",
       "\"a\": webhook.secret_file: required"},
      {"{\"sinks\":[{\"name\":\"a\",\"webhook\":{\"url\":\"https://x/\",\"secretFile\":\"/nope\"}}"
       "]}",
       "\"a\": webhook.secret_file:"},
      {absl::StrCat("{\"sinks\":[", Hook("a", ",\"caFile\":\"/nope.pem\""), "]}"),
       "\"a\": webhook.ca_file: cannot read"},
      {absl::StrCat("{\"sinks\":[", Hook("a", ",\"maxBatchRows\":-1"), "]}"),
       "\"a\": webhook.max_batch_rows"},
      {absl::StrCat("{\"sinks\":[", Hook("a", ",\"timeout\":\"-1s\""), "]}"),
       "\"a\": webhook.timeout"},
      {"{\"sinks\":[{\"name\":\"s\",\"syslog\":{\"address\":\"nohost\"}}]}",
       "\"s\": syslog.address: \"nohost\" is not host:port"},
      {"{\"sinks\":[{\"name\":\"s\",\"syslog\":{\"address\":\"h:70000\"}}]}",
       "\"s\": syslog.address"},
      {"{\"sinks\":[{\"name\":\"s\",\"syslog\":{\"address\":\"h:1\",\"caFile\":\"" + secret_ +
           "\"}}]}",
       "\"s\": syslog.ca_file: only with tls"},
      {"{\"sinks\":[{\"name\":\"s\",\"syslog\":{\"address\":\"h:1\",\"maxBatchRows\":-3}}]}",
       "\"s\": syslog.max_batch_rows"},
      {"{\"sinks\":[{\"name\":\"s\",\"filter\":{\"entityId\":\"u1\"},\"syslog\":{\"address\":"
       "\"h:1\"}}]}",
       "\"s\": filter.entity_id: requires filter.entity_type"},
  };
  for (const auto& [json, named] : cases) {
    auto plans = SinksOf(json);
    ASSERT_FALSE(plans.ok()) << json;
    EXPECT_EQ(plans.status().code(), absl::StatusCode::kInvalidArgument) << json;
    EXPECT_TRUE(absl::StrContains(plans.status().message(), named))
        << json << "\n  said: " << plans.status().message() << "\n  want: " << named;
    EXPECT_FALSE(absl::StrContains(plans.status().message(), "s3cret")) << plans.status();
  }
}

}  // namespace
}  // namespace ulticode::forward
