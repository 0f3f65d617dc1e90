// StepSpec: one program step as the plan writers assemble it before serialisation.
// Shared by codegen (codegen/Codegen.cpp) and the MLIR-free reference builder
// (runtime/plan/reference_builder.cpp), so the two emit steps through one path.
// Header-only over the generated schema: codegen still links no runtime code.
#pragma once

#include <string>
#include <vector>

#include "runtime/plan/plan_generated.h"

namespace g4c::plan {

struct StepSpec {
  fb::KernelId kernel;
  int layer = -1;
  std::vector<int> inputs, outputs, weights;
  std::string label;
  // attrs (KERNELS.md says which kernel reads which)
  float eps = 0, scale = 0, softcap = 0;
  int norm_dim = 0, window = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0, rotary_pairs = 0, kv_layer = -1;
  double rope_theta = 0;
  fb::Epilogue epilogue = fb::Epilogue::None;
  bool v_from_k = false;
};

// Serialises one step (default launch parameters, stream 0, no events; Attrs.k_from_v, deprecated,
// is never set).
inline flatbuffers::Offset<fb::Step> write_step(flatbuffers::FlatBufferBuilder& fbb, const StepSpec& s) {
  auto attrs = fb::CreateAttrs(fbb, s.eps, s.norm_dim, s.window, s.num_q_heads, s.num_kv_heads, s.head_dim,
                               s.rope_theta, s.rotary_pairs, s.softcap, s.scale, s.epilogue, s.kv_layer, s.v_from_k);
  return fb::CreateStepDirect(fbb, s.kernel, s.layer, &s.inputs, &s.outputs, &s.weights, attrs,
                              fb::CreateLaunch(fbb), 0, nullptr, -1, s.label.c_str());
}

}  // namespace g4c::plan
