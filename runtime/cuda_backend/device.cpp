// Device context, green-context emulation and the memory budget (see device.h).
#include "runtime/cuda_backend/device.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>

#include "models/error.h"

namespace g4c::cudart {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("cuda backend: ") + what + ": " + cudaGetErrorString(e));
}

namespace {
// Driver API entry points through the runtime (cudaGetDriverEntryPointByVersion), so the
// binaries do not link libcuda.so.1 and still start (and skip) on machines without a driver.
template <class F>
F entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult st{};
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDA_VERSION, cudaEnableDefault, &st) != cudaSuccess ||
      st != cudaDriverEntryPointSuccess || !p)
    throw Error(std::string("cuda backend: the driver has no ") + name + " (green contexts need CUDA 12.4+)");
  return reinterpret_cast<F>(p);
}
#define G4C_DRV(name) static const auto name##_p = entry<decltype(&name)>(#name)

void drv(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    G4C_DRV(cuGetErrorString);
    cuGetErrorString_p(r, &s);
    throw Error(std::string("cuda backend: ") + what + ": " + (s ? s : "unknown driver error") + " (" +
                std::to_string(int(r)) + ")");
  }
}
}  // namespace

Device::Device(const DeviceOptions& o) : opts_(o) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) throw Error("cuda backend: no CUDA device is available");
  if (o.device < 0 || o.device >= n)
    throw Error("cuda backend: device " + std::to_string(o.device) + " does not exist (" + std::to_string(n) + " found)");
  check(cudaSetDevice(o.device), "cudaSetDevice");
  check(cudaFree(nullptr), "creating the CUDA context");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties");
  name_ = prop.name;
  sms_ = prop.multiProcessorCount;
  if (o.green_sms > 0) {
    // DESIGN.md §5: SM resource → split of ≥ green_sms SMs → descriptor → green context; the
    // runtime API then uses it (cuCtxFromGreenCtx + cuCtxSetCurrent) and every kernel goes to
    // a stream created on it, so it runs only on those SMs.
    G4C_DRV(cuDeviceGet);
    G4C_DRV(cuDeviceGetDevResource);
    G4C_DRV(cuDevSmResourceSplitByCount);
    G4C_DRV(cuDevResourceGenerateDesc);
    G4C_DRV(cuGreenCtxCreate);
    G4C_DRV(cuCtxFromGreenCtx);
    G4C_DRV(cuCtxSetCurrent);
    G4C_DRV(cuGreenCtxStreamCreate);
    CUdevice dev;
    drv(cuDeviceGet_p(&dev, o.device), "cuDeviceGet");
    CUdevResource all{}, part{}, rest{};
    drv(cuDeviceGetDevResource_p(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource(SM)");
    unsigned groups = 1;
    drv(cuDevSmResourceSplitByCount_p(&part, &groups, &all, &rest, 0, unsigned(o.green_sms)),
        "cuDevSmResourceSplitByCount");
    if (groups < 1) throw Error("cuda backend: the device cannot give a group of " + std::to_string(o.green_sms) + " SMs");
    CUdevResourceDesc desc{};
    drv(cuDevResourceGenerateDesc_p(&desc, &part, 1), "cuDevResourceGenerateDesc");
    CUgreenCtx g{};
    drv(cuGreenCtxCreate_p(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    green_ = g;
    G4C_DRV(cuCtxGetCurrent);
    CUcontext prev{};
    drv(cuCtxGetCurrent_p(&prev), "cuCtxGetCurrent");
    prev_ctx_ = prev;
    CUcontext ctx{};
    drv(cuCtxFromGreenCtx_p(&ctx, g), "cuCtxFromGreenCtx");
    drv(cuCtxSetCurrent_p(ctx), "cuCtxSetCurrent(green)");
    CUstream s{}, c{};
    drv(cuGreenCtxStreamCreate_p(&s, g, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate");
    drv(cuGreenCtxStreamCreate_p(&c, g, CU_STREAM_NON_BLOCKING, 0), "cuGreenCtxStreamCreate(copy)");
    stream_ = reinterpret_cast<cudaStream_t>(s);
    copy_stream_ = reinterpret_cast<cudaStream_t>(c);
    sms_ = int(part.sm.smCount);
  } else {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate(copy)");
  }
  size_t free = 0;
  check(cudaMemGetInfo(&free, &total_), "cudaMemGetInfo");
  context_bytes_ = total_ - free;
  peak_ = context_bytes_;
  check_budget("after creating the CUDA context");
}

Device::~Device() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (green_) {
    try {
      G4C_DRV(cuStreamDestroy);
      G4C_DRV(cuGreenCtxDestroy);
      G4C_DRV(cuCtxSetCurrent);
      // Back to the context that was current before (the primary one), so later CUDA calls
      // of this thread do not land in a destroyed context.
      cuCtxSetCurrent_p(static_cast<CUcontext>(prev_ctx_));
      cuStreamDestroy_p(reinterpret_cast<CUstream>(stream_));
      cuStreamDestroy_p(reinterpret_cast<CUstream>(copy_stream_));
      cuGreenCtxDestroy_p(static_cast<CUgreenCtx>(green_));
    } catch (...) {
    }
  } else {
    if (stream_) cudaStreamDestroy(stream_);
    if (copy_stream_) cudaStreamDestroy(copy_stream_);
  }
}

size_t Device::used_bytes() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  const size_t used = total - free;
  peak_ = std::max(peak_, used);
  return used;
}

void Device::check_budget(const char* where, const std::string& breakdown) {
  const size_t used = used_bytes();
  if (opts_.budget_bytes && used > opts_.budget_bytes)
    throw Error(std::string("cuda backend: device memory ") + mib(used) + " exceeds the budget of " +
                mib(opts_.budget_bytes) + " " + where + " (context " + mib(context_bytes_) + ")" +
                (breakdown.empty() ? "" : "\n" + breakdown));
}

void Device::reserve(size_t bytes, const char* what, const std::string& breakdown) {
  const size_t used = used_bytes();
  if (opts_.budget_bytes && used + bytes > opts_.budget_bytes)
    throw Error(std::string("cuda backend: ") + what + " needs " + mib(bytes) + " but " + mib(used) +
                " of the " + mib(opts_.budget_bytes) + " budget are in use (context " + mib(context_bytes_) + ")" +
                (breakdown.empty() ? "" : "\n" + breakdown));
}

std::string Device::describe() const {
  std::string s = name_ + ", " + std::to_string(sms_) + " SMs";
  if (green_) s += " (green context" + (opts_.emulation.empty() ? "" : ", emulating " + opts_.emulation) + ")";
  s += ", budget " + (opts_.budget_bytes ? mib(opts_.budget_bytes) : std::string("none"));
  s += ", peak " + mib(peak_) + ", context " + mib(context_bytes_);
  return s;
}

}  // namespace g4c::cudart
