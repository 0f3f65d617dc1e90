// A device allocation that fails mid-run, injected through CudaOptions::alloc_fault (armed
// after open()): every allocation generate() asks for fails. Either generate() allocates (the
// activation arena grows on demand) and the failure surfaces as one g4c::Error naming it
// (cudaErrorMemoryAllocation's text), or it allocates nothing and its tokens equal those of a
// run without the hook. Never a crash, never a silently wrong result. Label "gpu": skips
// without a device.
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "models/error.h"
#include "tests/cuda_backend/support.h"

namespace g4c::runtime {
namespace {

TEST(GpuFaults, DeviceAllocationFailureMidRunIsAClearError) {
  REQUIRE_GPU();
  std::atomic<bool> armed{false};
  std::atomic<int> faults{0};
  CudaOptions co;
  co.max_tokens = 16;
  co.alloc_fault = [&](size_t, const char*) {
    if (!armed.load()) return false;
    ++faults;
    return true;
  };
  auto e = gpurt::open_cuda(gpurt::tiny_dir(), co, {.max_sequences = 2, .token_budget = 64});
  GenerationRequest r;
  r.id = "0";
  r.prompt.assign(64, 7);
  r.prompt[0] = 2;
  r.max_new_tokens = 4;
  r.ignore_eos = true;
  armed = true;
  try {
    const auto got = e->generate({r});
    ASSERT_EQ(faults.load(), 0) << "allocations failed but generate() reported success";
    auto plain = gpurt::open_cuda(gpurt::tiny_dir(), {}, {.max_sequences = 2, .token_budget = 64});
    EXPECT_EQ(got.at(0).tokens, plain->generate({r}).at(0).tokens);
  } catch (const Error& err) {
    EXPECT_GE(faults.load(), 1) << err.what();
    EXPECT_NE(std::string(err.what()).find("cuda backend"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("memory"), std::string::npos) << err.what();
  }
}

TEST(GpuFaults, DeviceAllocationFailureAtOpenIsAClearError) {
  REQUIRE_GPU();
  CudaOptions co;
  co.alloc_fault = [](size_t, const char*) { return true; };
  try {
    gpurt::open_cuda(gpurt::tiny_dir(), co, {.max_sequences = 2});
    FAIL() << "an injected device allocation failure at open went unnoticed";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("cuda backend"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace g4c::runtime
