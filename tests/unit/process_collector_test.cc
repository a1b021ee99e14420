// The process collector's parsing of /proc/self/stat and /proc/stat: it runs
// on the scrape thread, so malformed text must give no sample, never an
// exception (which would end the process).
#include "common/metrics/process_collector.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ulticode::metrics {
namespace {

// A /proc/[pid]/stat line whose comm holds ") " and spaces; utime 100,
// stime 50, num_threads 7, starttime 4000, vsize 123456789, rss 2048.
std::string StatLine(const std::string& utime = "100", const std::string& rss = "2048") {
  return absl::StrCat("4242 (my ) odd comm) S 1 4242 4242 0 -1 4194560 500 0 0 0 ", utime,
                      " 50 0 0 20 0 7 0 4000 123456789 ", rss,
                      " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n");
}

TEST(ProcessCollectorTest, ParsesTheFieldsItReports) {
  auto stat = ParseProcStat(StatLine());
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->cpu_ticks, 150);
  EXPECT_EQ(stat->threads, 7);
  EXPECT_EQ(stat->start_ticks, 4000);
  EXPECT_EQ(stat->vsize_bytes, 123456789);
  EXPECT_EQ(stat->rss_pages, 2048);
}

TEST(ProcessCollectorTest, MalformedStatGivesNoSampleAndNoException) {
  for (const std::string& text : {
           StatLine("x"),                         // not a number
           StatLine(""),                          // empty field (two spaces)
           StatLine("12abc"),                     // trailing garbage
           StatLine("1e999"),                     // out of range
           StatLine("100", "nan"),                // not finite
           std::string("4242 (comm) S 1 2 3\n"),  // too few fields
           std::string("no parenthesis at all"),
           std::string(),
       }) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(ParseProcStat(text).has_value());
  }
}

TEST(ProcessCollectorTest, BootTimeIsParsedOrAbsent) {
  EXPECT_EQ(ParseBootTime("cpu  1 2 3\nbtime 1750000000\nprocesses 9\n"), 1750000000);
  EXPECT_FALSE(ParseBootTime("cpu  1 2 3\nprocesses 9\n").has_value());
  EXPECT_FALSE(ParseBootTime("btime soon\n").has_value());
  EXPECT_FALSE(ParseBootTime("btime 1e999\n").has_value());
}

TEST(ProcessCollectorTest, CollectsThisProcess) {
  const auto families = ProcessCollector().Collect();
  ASSERT_EQ(families.size(), 7u);
  for (const auto& f : families) {
    SCOPED_TRACE(f.name);
    ASSERT_EQ(f.metric.size(), 1u);
    const double v = f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value
                                                               : f.metric[0].gauge.value;
    EXPECT_GE(v, 0);
    if (f.name == "process_threads" || f.name == "process_resident_memory_bytes") {
      EXPECT_GT(v, 0);
    }
  }
}

}  // namespace
}  // namespace ulticode::metrics
