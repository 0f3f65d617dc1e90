// g4c.Plan / g4c.load_plan / g4c.build_reference_plan: runtime/plan/plan.h.
#include <pybind11/stl.h>

#include <algorithm>
#include <set>

#include "common.h"
#include "models/config.h"
#include "models/dtype.h"
#include "models/safetensors.h"
#include "runtime/plan/reference_builder.h"

namespace g4c::python {

namespace {

namespace fb = plan::fb;

// The memory figures the plan itself determines (bytes). The CUDA context and the KV pool
// size are runtime options, so the table gives KV per sequence (rings) and per token (paged).
py::dict memory_table(const plan::Plan& p) {
  int64_t resident = 0, streamed = 0, activations = 0, ring_per_seq = 0, paged_per_token = 0;
  std::set<int> streamed_layers;
  std::vector<int> weight_layer(p->weights() ? p->weights()->size() : 0, -1);
  if (p->program())
    for (const auto* s : *p->program())
      if (s->weights())
        for (int w : *s->weights())
          if (w >= 0 && size_t(w) < weight_layer.size()) weight_layer[w] = s->layer();
  if (p->weights())
    for (size_t i = 0; i < p->weights()->size(); ++i) {
      const auto* w = p->weights()->Get(i);
      if (w->residency() == fb::Residency::Streamed) {
        streamed += int64_t(plan::weight_storage_bytes(*w));
        if (weight_layer[i] >= 0) streamed_layers.insert(weight_layer[i]);
      } else {
        resident += int64_t(plan::weight_storage_bytes(*w));
      }
    }
  if (p->buckets())
    for (const auto* b : *p->buckets()) activations = std::max(activations, int64_t(b->arena_bytes()));
  if (p->kv())
    for (const auto* l : *p->kv()) {
      // K and V of a token.
      const int64_t per_token = int64_t(plan::kv_token_bytes(*l));
      if (l->kind() == fb::KvKind::Ring)
        ring_per_seq += per_token * l->capacity();
      else
        paged_per_token += per_token;
    }
  py::dict d;
  d["weights_resident"] = resident;
  d["weights_streamed"] = streamed;
  d["streamed_layers"] = int64_t(streamed_layers.size());
  d["activations"] = activations;
  d["kv_ring_bytes_per_sequence"] = ring_per_seq;
  d["kv_paged_bytes_per_token"] = paged_per_token;
  return d;
}

}  // namespace

void bind_plan(py::module_& m) {
  py::class_<PlanHandle>(m, "Plan", py::dynamic_attr(), R"doc(
An executable plan (.g4p): the kernel program for one checkpoint.

Made by g4c.compile(), g4c.build_reference_plan() or g4c.load_plan(); run it with
g4c.Engine(plan). `model_dir` is the checkpoint it was built for ("" when loaded from a
file: pass model_dir= to g4c.Engine then).

>>> plan = g4c.build_reference_plan(MODEL)
>>> plan.generator
'g4c reference_builder 0.1'
>>> plan.num_layers, plan.vocab_size
(12, 8192)
)doc")
      .def(
          "save",
          [](const PlanHandle& h, const py::object& path) {
            const auto p = to_path(path);
            py::gil_scoped_release release;
            h.plan->save(p);
          },
          py::arg("path"), R"doc(
Writes the plan to a .g4p file (read back with g4c.load_plan).

>>> import os, tempfile
>>> plan = g4c.build_reference_plan(MODEL)
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.g4p")
>>> plan.save(path)
>>> g4c.load_plan(path).fingerprint == plan.fingerprint
True
)doc")
      .def(
          "memory_table",
          [](const py::object& self) -> py::dict {
            // A plan from g4c.compile() carries the table the compiler printed.
            if (py::hasattr(self, "_compile_memory_table")) {
              py::dict t = self.attr("_compile_memory_table");
              if (!t.empty()) return py::dict(t);
            }
            return memory_table(*self.cast<const PlanHandle&>().plan);
          },
          R"doc(
Device memory in bytes. For a plan from g4c.compile(): the compiler's table, as
`g4c compile` prints it (weights_resident, weights_streamed, staging, kv, activations,
workspaces, graph_pools, context, total, budget, free). Otherwise what the plan itself
determines: weights_resident / weights_streamed (checkpoint bytes by residency),
streamed_layers, activations (arena of the largest shape bucket),
kv_ring_bytes_per_sequence (sliding layers) and kv_paged_bytes_per_token (full layers; the
pool size is a runtime option).

>>> t = g4c.build_reference_plan(MODEL).memory_table()
>>> sorted(t)
['activations', 'kv_paged_bytes_per_token', 'kv_ring_bytes_per_sequence', 'streamed_layers', 'weights_resident', 'weights_streamed']
>>> t["weights_streamed"], t["weights_resident"] > 0
(0, True)
)doc")
      .def(
          "describe", [](const PlanHandle& h, bool with_weights) { return plan::describe(*h.plan, with_weights); },
          py::arg("with_weights") = false, R"doc(
The whole plan as text (what `g4c inspect` prints).

>>> print(g4c.build_reference_plan(MODEL).describe().splitlines()[0])  # doctest: +ELLIPSIS
plan...
)doc")
      .def_readwrite("model_dir", &PlanHandle::model_dir, "Model directory the plan was built for (\"\" if unknown).")
      .def_property_readonly("generator", [](const PlanHandle& h) { return h.plan->root().generator() ? h.plan->root().generator()->str() : std::string(); })
      .def_property_readonly("fingerprint", [](const PlanHandle& h) { return h.plan->root().fingerprint(); })
      .def_property_readonly("num_steps", [](const PlanHandle& h) { return h.plan->root().program() ? int(h.plan->root().program()->size()) : 0; })
      .def_property_readonly("num_layers", [](const PlanHandle& h) { return h.plan->root().model() ? h.plan->root().model()->num_layers() : 0; })
      .def_property_readonly("vocab_size", [](const PlanHandle& h) { return h.plan->root().model() ? h.plan->root().model()->vocab_size() : 0; })
      .def_property_readonly("max_chunk_tokens", [](const PlanHandle& h) { return h.plan->root().max_chunk_tokens(); })
      .def("to_bytes", [](const PlanHandle& h) {
        const auto& b = h.plan->bytes();
        return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
      }, R"doc(
The .g4p file contents (bytes), as save() writes them.

>>> g4c.build_reference_plan(MODEL).to_bytes()[4:8]
b'G4CP'
)doc")
      .def("__repr__", [](const PlanHandle& h) {
        return "<g4c.Plan " + h.plan->name() + " steps=" +
               std::to_string(h.plan->root().program() ? h.plan->root().program()->size() : 0) + ">";
      });

  m.def(
      "load_plan",
      [](const py::object& path, const py::object& model_dir) {
        const auto p = to_path(path);
        PlanHandle h;
        {
          py::gil_scoped_release release;
          h.plan = std::make_shared<const plan::Plan>(plan::Plan::load_file(p));
        }
        if (!model_dir.is_none()) h.model_dir = to_path(model_dir).string();
        return h;
      },
      py::arg("path"), py::arg("model_dir") = py::none(), R"doc(
Reads and verifies a .g4p file. Raises g4c.Error naming the file when it is truncated,
corrupt or of another format version. `model_dir` (optional) records the checkpoint.

>>> g4c.load_plan("/nonexistent.g4p")
Traceback (most recent call last):
...
g4c.Error: ...nonexistent.g4p...
)doc");

  m.def(
      "build_reference_plan",
      [](const py::object& model_dir, bool fused, int max_chunk_tokens, int kv_block_size) {
        const auto dir = to_path(model_dir);
        PlanHandle h;
        h.model_dir = dir.string();
        {
          py::gil_scoped_release release;
          const auto cfg = models::load_model_config(dir);
          const auto ckpt = models::Checkpoint::open(dir, /*header_only=*/true);
          plan::ReferenceOptions o;
          o.fused = fused;
          o.max_chunk_tokens = max_chunk_tokens;
          o.kv_block_size = kv_block_size;
          h.plan = std::make_shared<const plan::Plan>(plan::build_reference_plan(cfg, *ckpt, o));
        }
        return h;
      },
      py::arg("model_dir"), py::arg("fused") = true, py::arg("max_chunk_tokens") = 256, py::arg("kv_block_size") = 16,
      R"doc(
The runtime's reference plan for a checkpoint, built without MLIR
(runtime/plan/reference_builder.h): the same program `g4c run --model DIR` uses.

>>> plan = g4c.build_reference_plan(MODEL, max_chunk_tokens=64)
>>> plan.max_chunk_tokens, plan.model_dir == MODEL
(64, True)
)doc");
}

}  // namespace g4c::python
