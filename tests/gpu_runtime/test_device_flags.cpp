// Backend selection from CLI flags (runtime/cuda_backend/select.h): CPU by default, clear
// errors for bad combinations, and --device cuda either builds the CUDA backend or (built
// without CUDA) says so. Runs without a GPU.
#include <gtest/gtest.h>

#include "models/error.h"
#include "runtime/cuda_backend/select.h"

using namespace g4c;

TEST(DeviceFlags, CpuIsTheDefaultAndTakesNoCudaOptions) {
  runtime::DeviceFlags f;
  EXPECT_EQ(runtime::backend_for_flags(f, "unused"), nullptr);
  f.emulate = "1g.10gb";
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);
  f.emulate.clear();
  f.trace = "t.json";
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);
  f.trace.clear();
  f.prefill_attention = 11;  // a CUDA kernel choice
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);
  f.prefill_attention = -1;
  f.decode_ims = true;  // likewise
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);
  f.decode_ims = false;
  // --device-sample and --device-argmax are on by default (the CPU chooses tokens on the host,
  // where its logits are), so the CPU takes them, on or off.
  EXPECT_TRUE(f.device_sample && f.device_argmax);
  f.device_sample = f.device_argmax = false;
  EXPECT_EQ(runtime::backend_for_flags(f, "unused"), nullptr);
  f.device_sample = f.device_argmax = true;
  f.lm_head_rd = true;  // a CUDA kernel choice
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);
}

TEST(DeviceFlags, UnknownDeviceIsAnError) {
  runtime::DeviceFlags f;
  f.device = "tpu";
  try {
    runtime::backend_for_flags(f, "unused");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos);
  }
}

TEST(DeviceFlags, CudaWithoutADeviceOrBuildIsAnError) {
  runtime::DeviceFlags f;
  f.device = "cuda";
#ifdef G4C_HAVE_CUDA_BACKEND
  if (runtime::cuda_device_available()) GTEST_SKIP() << "a device is present (covered by the gpu tests)";
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);  // "no CUDA device is available"
  f.budget = "lots";
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);  // bad --budget before any device work
#else
  EXPECT_THROW(runtime::backend_for_flags(f, "unused"), Error);  // built without CUDA
#endif
}
