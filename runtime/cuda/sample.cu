// Token sampling on the device (API in fused.cuh): runtime/sampler.h's definition, one block of
// 1024 threads per row, no sort of the vocabulary.
//
// The order "higher logit first, lower index on ties" is one 64-bit key per token, okey =
// fkey(l) · 2^32 + (2^32 − 1 − i) (fkey: the float's bits made monotone, NaN as −inf, −0 as +0),
// larger = earlier. A kept set is a prefix of that order, so it is {okey ≥ lim} for the okey of
// its last token. Finding that token (the k-th for top_k; the one where the running weight
// reaches top_p · Σw for the nucleus):
//   1. a histogram of counts and weights over 2048 bins of x = (max − l) / T (monotone in the
//      order; one pass) gives the bin holding the boundary;
//   2. a radix descent over okey restricted to that bin (6 passes of 11 / 10 bits: histogram,
//      then the digit where the running count or weight crosses) gives the token. Its first pass
//      reads the row and lists the bin's tokens (up to 3072, in shared memory); the other five
//      read only the list (when the bin holds more tokens, they read the row again).
// The draw: s = Σ_K w, then each thread sums a contiguous segment in index order, an exclusive
// scan over the threads, and the thread whose segment holds u · s walks it.
// Weights are recomputed per pass (w = expf(−x)): no workspace; a row is ≤ 7 passes over 1 MB
// (L2) with the list (~10–16 without), ~3 for plain temperature.
// Arithmetic as the host's: x, the bins and the draw's comparisons use the same float / double
// expressions; expf (≤ 2 ulp) and the sums' association differ, so a token can differ from the
// host's only where u · s or the nucleus's crossing lies within ~1e-6 relative of a boundary
// (GpuFused.SampleRowsFollowTheHostSampler skips those cases and counts them).
#include <cuda_runtime.h>

#include "runtime/cuda/fused.cuh"
#include "runtime/cuda/sample_kernel.cuh"

namespace g4c::cuda {

cudaError_t sample_rows(const float* logits, int m, int n, long ldl, const SampleRow* rows, int* out,
                        cudaStream_t stream) {
  if (m <= 0) return cudaSuccess;
  if (n <= 0) return cudaErrorInvalidValue;
  sample_detail::sample_kernel<<<m, sample_detail::kST, 0, stream>>>(logits, n, ldl, rows, out, true);
  return cudaGetLastError();
}

}  // namespace g4c::cuda
