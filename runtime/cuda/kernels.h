// The CUDA kernels of the g4c CUDA backend: plain host functions over device pointers, each
// enqueued on the given stream. Families:
//   gemm.cuh      W4A16 GEMM (decode split-K streaming kernel, tensor-core tile kernel),
//                 BF16 GEMM, INT4 load-time repack, fused epilogues (gelu·up, residual, softcap)
//   gemm_w8.cuh   the per-row INT8 table: LM head GEMM (fp32 logits) and embedding gather
//   attention.cuh flash attention over packed variable-length chunks, paged / ring KV, split-KV
//   fused.cuh     embedding gather, RMSNorm (+residual, layer_scalar), q/k norm + RoPE + KV
//                 write, v_norm, argmax, sampling (sample.cu)
// Headers are plain C++ (need only the CUDA toolkit include dir); link g4c_cuda_kernels.
#pragma once

#include "runtime/cuda/attention.cuh"
#include "runtime/cuda/fused.cuh"
#include "runtime/cuda/gemm.cuh"
#include "runtime/cuda/gemm_w8.cuh"
