// The CUDA backend's on/off switches (runtime::DeviceFlags), registered the same way on the
// subcommands that run a model: `g4c run` and `g4c bench`.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime/cuda_backend/select.h"

namespace g4c::cli {

inline void add_cuda_switches(CLI::App* cmd, runtime::DeviceFlags& dev) {
  cmd->add_flag("--pdl,!--no-pdl", dev.pdl,
                "cuda: programmatic dependent launch of the decode GEMMs, decode attention, norms and q/k RoPE "
                "(each kernel starts while the one before it finishes; on by default)");
  cmd->add_flag("--fuse-siblings,!--no-fuse-siblings", dev.fuse_siblings,
                "cuda: q/k/v (Linears reading one input) as one GEMM over concatenated weights (on by default)");
  cmd->add_flag("--deterministic", dev.deterministic,
                "cuda: decode GEMMs sum their parts in a fixed order, so a run's tokens and logits repeat "
                "exactly (off by default)");
  cmd->add_flag("--whole-tiles,!--no-whole-tiles", dev.whole_tiles,
                "cuda: decode GEMMs give their blocks whole 16-row tiles where that was measured faster "
                "(on by default; --no-whole-tiles: stream-K ranges everywhere)");
  cmd->add_flag("--device-argmax,!--no-device-argmax", dev.device_argmax,
                "cuda: greedy tokens from an argmax on the device, so only token ids are copied back (on by default)");
  cmd->add_flag("--device-sample,!--no-device-sample", dev.device_sample,
                "cuda: sampled tokens (temperature > 0) chosen on the device too, so only token ids are copied "
                "back (on by default; runtime/sampler.h has the definition the device and the host follow)");
  cmd->add_option("--prefill-attention", dev.prefill_attention,
                  "cuda: prefill attention kernel, -1 the default rule, 0 the flash kernel, 1-13 a Hopper variant "
                  "(9-13 warp-specialized; 11, 13 stream-K; 12, 13 = 9, 11 with a producer that never waits "
                  "for its copies; BENCHMARKS.md, Attention)")
      ->check(CLI::Range(-1, 13));
  cmd->add_flag("--lm-head-rd", dev.lm_head_rd,
                "cuda: the decode LM head by the register-direct BF16 kernel (weights straight into mma "
                "fragments, no shared memory) instead of the tile kernel (off by default: not yet run on a GPU)");
  cmd->add_flag("--decode-ims", dev.decode_ims,
                "cuda: decode GEMMs shift the INT4 nibbles with integer multiplies (FMA pipe) instead of shifts "
                "(ALU pipe): lean variants 18/19 for 14/17 (off by default; BENCHMARKS.md, W4A16 decode GEMM)");
}

}  // namespace g4c::cli
