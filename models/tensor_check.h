// Checks of tensor data read from a checkpoint: non-finite values (NaN/inf) in a weight make
// every logit NaN, and argmax then silently picks token 0; callers warn before serving.
#pragma once

#include <cstdint>

#include "models/safetensors.h"

namespace g4c::models {

// Number of NaN/inf elements of a BF16, F16 or F32 tensor (by bit pattern: an all-ones
// exponent); 0 for other dtypes. Reads the whole tensor once.
int64_t count_nonfinite(const TensorView& t);

}  // namespace g4c::models
