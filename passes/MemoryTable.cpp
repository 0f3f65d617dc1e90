// The device memory table: storage in a module attribute and its printout.
#include "passes/MemoryTable.h"

#include <cstdio>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace g4c::passes {
namespace {

constexpr const char* kFields[] = {"weights_resident", "weights_streamed", "staging",  "kv",
                                   "activations",      "workspaces",       "graph_pools", "context",
                                   "budget",           "streamed_layers"};

int64_t* field(MemoryTable& t, int i) {
  int64_t* f[] = {&t.weights_resident, &t.weights_streamed, &t.staging,    &t.kv,     &t.activations,
                  &t.workspaces,       &t.graph_pools,      &t.context,    &t.budget, &t.streamed_layers};
  return f[i];
}

std::string row(const char* name, int64_t bytes, const std::string& note = "") {
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-22s %12.2f MiB %16lld B%s%s\n", name, double(bytes) / (1 << 20),
                static_cast<long long>(bytes), note.empty() ? "" : "  ", note.c_str());
  return buf;
}

}  // namespace

bool readMemoryTable(mlir::ModuleOp module, MemoryTable* out) {
  auto dict = module->getAttrOfType<mlir::DictionaryAttr>("g4.memory_table");
  if (!dict) return false;
  MemoryTable t;
  for (int i = 0; i < 10; ++i)
    if (auto a = dict.getAs<mlir::IntegerAttr>(kFields[i])) *field(t, i) = a.getInt();
  *out = t;
  return true;
}

void writeMemoryTable(mlir::ModuleOp module, const MemoryTable& table) {
  mlir::Builder b(module.getContext());
  MemoryTable t = table;
  llvm::SmallVector<mlir::NamedAttribute> entries;
  for (int i = 0; i < 10; ++i) entries.push_back(b.getNamedAttr(kFields[i], b.getI64IntegerAttr(*field(t, i))));
  entries.push_back(b.getNamedAttr("total", b.getI64IntegerAttr(t.total())));
  module->setAttr("g4.memory_table", b.getDictionaryAttr(entries));
}

std::string formatMemoryTable(const MemoryTable& t) {
  std::string s = "device memory plan\n";
  s += row("weights resident", t.weights_resident);
  s += row("weights streamed", t.weights_streamed,
           "(pinned host memory, " + std::to_string(t.streamed_layers) + " layers; not device bytes)");
  s += row("streaming staging", t.staging, t.streamed_layers ? "(double buffer)" : "");
  s += row("KV cache", t.kv);
  s += row("activations", t.activations, "(arena, largest bucket)");
  s += row("workspaces", t.workspaces);
  s += row("graph pools", t.graph_pools);
  s += row("CUDA context", t.context);
  s += row("total", t.total());
  const int64_t free = t.budget - t.total();
  s += row("budget", t.budget, free >= 0 ? "" : "(over budget)");
  s += row(free >= 0 ? "free" : "missing", free >= 0 ? free : -free);
  return s;
}

}  // namespace g4c::passes
