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
  // --deterministic: the CPU backend's sums have one fixed order already, so it takes the flag.
  f.deterministic = true;
  EXPECT_EQ(runtime::backend_for_flags(f, "unused"), nullptr);
}

#ifdef G4C_HAVE_CUDA_BACKEND
// The kernel options a CUDA backend launches with are a value derived from its own CudaOptions
// (launch_options), not process-wide state: options made for two backends keep their own values
// whatever order they are made in, and PDL is off exactly when weights stream.
TEST(DeviceFlags, KernelOptionsArePerInstance) {
  runtime::CudaOptions a, b;
  EXPECT_TRUE(a.kernels.pdl);
  EXPECT_FALSE(a.kernels.deterministic);
  b.kernels.deterministic = true;
  b.kernels.pdl = false;
  const cuda::KernelOptions ka = runtime::launch_options(a, false), kb = runtime::launch_options(b, false);
  const cuda::KernelOptions ka_streaming = runtime::launch_options(a, true);
  EXPECT_TRUE(ka.pdl);
  EXPECT_FALSE(ka.deterministic);
  EXPECT_FALSE(kb.pdl);
  EXPECT_TRUE(kb.deterministic);
  EXPECT_FALSE(ka_streaming.pdl);
  EXPECT_FALSE(ka_streaming.deterministic);
  EXPECT_EQ(runtime::launch_options(a, false).deterministic, false);  // b's options changed nothing of a's
}
#endif

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
