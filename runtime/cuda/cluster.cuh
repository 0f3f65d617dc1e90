// Thread-block cluster helpers shared by the sm_90 kernels that combine partial results through
// distributed shared memory (split-K GEMM in gemm_sm90_rs.cu, split key ranges in
// attention_sm90.cu). Only included from .cu.
#pragma once

#include <cstdint>

#include "runtime/cuda/common.cuh"

namespace g4c::cuda::detail {

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of the cluster's blocks arrives (release) / waits (acquire).
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory"); }
// 16 bytes at the same shared-memory offset in block `rank` of the cluster.
__device__ __forceinline__ float4 ld_cluster_f4(const void* local, uint32_t rank) {
  uint32_t ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(smem_u32(local)), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(ra)
               : "memory");
  return v;
}

// 8 bytes at the same shared-memory offset in block `rank` of the cluster.
__device__ __forceinline__ float2 ld_cluster_f2(const void* local, uint32_t rank) {
  uint32_t ra;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(smem_u32(local)), "r"(rank));
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(ra) : "memory");
  return v;
}

// Host side: a launch configuration for cudaLaunchKernelEx / cudaOccupancyMaxActiveClusters with
// thread-block clusters of `cluster` blocks; `at` (kept alive by the caller) holds the attribute.
inline cudaLaunchConfig_t cluster_launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, dim3 cluster,
                                                cudaLaunchAttribute* at) {
  at->id = cudaLaunchAttributeClusterDimension;
  at->val.clusterDim.x = cluster.x;
  at->val.clusterDim.y = cluster.y;
  at->val.clusterDim.z = cluster.z;
  return launch_config(grid, block, smem, stream, at, 1);
}

}  // namespace g4c::cuda::detail
