// The CUDA backend refuses a plan whose KV cache is FP8 (plan.fbs KvLayer.dtype F8E4M3): only
// the CPU backend reads that format. Label "gpu": skips without a CUDA device.
#include <gtest/gtest.h>

#include <string>

#include "models/error.h"
#include "tests/cuda_backend/support.h"

namespace g4c::gpurt {
namespace {

TEST(CudaBackend, RefusesAnFp8KvPlan) {
  REQUIRE_GPU();
  runtime::EngineOptions eo{.max_sequences = 2, .max_seq_len = 64};
  eo.reference_kv_dtype = "fp8";
  try {
    open_cuda(tiny_dir(), {}, eo);
    FAIL() << "the CUDA backend opened an FP8 KV plan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp8 KV cache: the CUDA backend does not read it yet; compile with --kv-dtype bf16"),
              std::string::npos)
        << e.what();
  }
  // The same plan with BF16 KV opens.
  eo.reference_kv_dtype = "bf16";
  EXPECT_NE(open_cuda(tiny_dir(), {}, eo), nullptr);
}

}  // namespace
}  // namespace g4c::gpurt
