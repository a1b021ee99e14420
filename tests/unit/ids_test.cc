#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/ids/clock.h"
#include "common/ids/uuid.h"
#include "gtest/gtest.h"

namespace ulticode::ids {
namespace {

TEST(UuidTest, V7IsWellFormedAndCarriesItsTime) {
  const absl::Time t = absl::FromUnixMillis(1'796'000'000'123);
  const std::string id = NewUuidV7At(t);
  ASSERT_EQ(id.size(), 36u);
  EXPECT_TRUE(IsValidUuid(id));
  EXPECT_EQ(id[14], '7');                                          // version
  EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos);  // RFC variant
  absl::Time back;
  ASSERT_TRUE(UuidV7Time(id, &back));
  EXPECT_EQ(back, t);
}

TEST(UuidTest, StrictlyIncreasingWithinOneMillisecondAndAcrossThreads) {
  const absl::Time t = absl::FromUnixMillis(1'796'000'000'000);
  std::string prev = NewUuidV7At(t);
  for (int i = 0; i < 10000; ++i) {
    std::string next = NewUuidV7At(t);
    ASSERT_LT(prev, next) << i;
    prev = next;
  }
  absl::Mutex mu;
  std::set<std::string> all;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<std::string> mine;
      for (int i = 0; i < 5000; ++i) mine.push_back(NewUuidV7());
      for (size_t i = 1; i < mine.size(); ++i) EXPECT_LT(mine[i - 1], mine[i]);
      absl::MutexLock lock(&mu);
      all.insert(mine.begin(), mine.end());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(all.size(), 20000u);
}

TEST(UuidTest, Validation) {
  EXPECT_TRUE(IsValidUuid("0190a8e4-7b5c-7d3e-8f00-0123456789ab"));
  EXPECT_TRUE(IsValidUuid("0190A8E4-7B5C-7D3E-8F00-0123456789AB"));
  EXPECT_FALSE(IsValidUuid(""));
  EXPECT_FALSE(IsValidUuid("0190a8e4-7b5c-7d3e-8f00-0123456789a"));
  EXPECT_FALSE(IsValidUuid("0190a8e4x7b5c-7d3e-8f00-0123456789ab"));
  EXPECT_FALSE(IsValidUuid("0190a8e4-7b5c-7d3e-8f00-0123456789ag"));
  absl::Time t;
  EXPECT_FALSE(UuidV7Time("0190a8e4-7b5c-4d3e-8f00-0123456789ab", &t));  // v4
}

TEST(ClockTest, FakeClockMovesOnlyWhenTold) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(30));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(30));
  EXPECT_GT(SystemClock().Now(), absl::FromUnixSeconds(1'700'000'000));
}

}  // namespace
}  // namespace ulticode::ids
