// --export-max-concurrent (admin/query/audit_export.h): never more exports
// at once than the bound, from any number of threads, and a freed place is
// taken again.
#include <atomic>
#include <thread>
#include <vector>

#include "admin/query/audit_export.h"
#include "common/server/error_details.h"
#include "common/server/grpc_status.h"
#include "gtest/gtest.h"

namespace ulticode::admin::query {
namespace {

TEST(ExportSlotsTest, OneMoreThanTheBoundIsRefusedWithARetryDelayUntilOneEnds) {
  ExportSlots slots(2);
  auto a = slots.Enter();
  auto b = slots.Enter();
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = slots.Enter();
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("--export-max-concurrent"), std::string::npos);
  EXPECT_TRUE(server::ErrorDetails::Of(server::ToGrpcStatus(c.status(), "ExportAuditLogs"))
                  .retry_info.has_value());
  a->reset();
  EXPECT_TRUE(slots.Enter().ok());
}

TEST(ExportSlotsTest, ThreadsRacingForPlacesNeverHoldMoreThanTheBound) {
  constexpr int kMax = 3, kThreads = 8, kRounds = 5000;
  ExportSlots slots(kMax);
  std::atomic<int> holding{0}, most{0}, entered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        auto slot = slots.Enter();
        if (!slot.ok()) continue;
        entered.fetch_add(1);
        const int now = holding.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        holding.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), kMax);
  EXPECT_GT(entered.load(), 0);
  // Every place is free again.
  std::vector<ExportSlots::Slot> held;
  for (int i = 0; i < kMax; ++i) held.push_back(*slots.Enter());
  EXPECT_FALSE(slots.Enter().ok());
}

}  // namespace
}  // namespace ulticode::admin::query
