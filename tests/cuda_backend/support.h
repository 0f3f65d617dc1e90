// Helpers of the CUDA runtime tests (tests/cuda_backend/*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "runtime/cuda_backend/cuda_backend.h"
#include "runtime/engine.h"

namespace g4c::gpurt {

#define REQUIRE_GPU() \
  if (!::g4c::runtime::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

inline std::filesystem::path source_dir() {
  const char* s = std::getenv("G4C_SOURCE_DIR");
  return s ? std::filesystem::path(s) : std::filesystem::path(".");
}
inline std::filesystem::path tiny_dir() { return source_dir() / "models" / "gemma4-tiny"; }

inline std::unique_ptr<runtime::Engine> open_cuda(const std::filesystem::path& model, runtime::CudaOptions co = {},
                                                  runtime::EngineOptions eo = {.max_sequences = 8}) {
  co.model_dir = model;
  return runtime::Engine::open(model, std::nullopt, eo, runtime::make_cuda_backend(co));
}

}  // namespace g4c::gpurt
