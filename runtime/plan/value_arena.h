// Liveness-shared placement of a plan's activation values in one arena.
//
// A compiled plan has a value per SSA result of every layer (hundreds for Gemma-4-12B); one
// buffer each at 512 token rows is ~1.9 GB. Values whose lifetimes (first to last step that
// touches them) do not intersect may share bytes. `place_values` assigns offsets greedily
// (largest first, lowest offset that overlaps no placed value of an intersecting lifetime).
// Intervals are inclusive, so a step's outputs never alias its inputs (kernels such as
// attention require out != q). Pure C++: used by the CUDA backend, tested on the CPU.
// The lifetimes assume whole-program runs: a caller that runs the program in pieces and
// reads or writes values in between (Engine::forward(first, last), GPTQ calibration) may find
// a value clobbered by one that shares its bytes, so such callers use unshared values (the
// reference plans, or CudaOptions::share_values = 0).
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/plan/plan.h"

namespace g4c::plan {

struct Lifetime {
  int first = -1;  // first step touching the value (-1: never touched; not placed)
  int last = -1;   // last step touching it (inclusive)
};

struct ArenaLayout {
  std::vector<size_t> offset;  // per value; unplaced values get offset 0 and size 0
  size_t bytes = 0;            // arena size
};

// Lifetimes from the program: every input/output of step i touches the value at i. Values the
// host reads after a run (the logits value, LmHead and Argmax outputs) live to the end.
std::vector<Lifetime> value_lifetimes(const Plan& plan);

// Offsets for `size[v]` bytes per value (each rounded up to `align`), values with intersecting
// lifetimes disjoint. size 0 or first < 0: not placed.
ArenaLayout place_values(const std::vector<Lifetime>& life, const std::vector<size_t>& size, size_t align = 256);

// True when no two placed values with intersecting lifetimes overlap in bytes (for tests).
bool arena_is_consistent(const std::vector<Lifetime>& life, const std::vector<size_t>& size, const ArenaLayout& a);

}  // namespace g4c::plan
