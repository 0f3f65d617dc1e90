// Shared pieces of the g4c Python bindings (tools/python/src/*.cpp).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "models/progress.h"
#include "runtime/plan/plan.h"

namespace g4c::python {

namespace py = pybind11;

// A plan together with the model directory it was built for (when known: compile() and
// build_reference_plan() record it; load_plan() does not know it).
struct PlanHandle {
  std::shared_ptr<const plan::Plan> plan;
  std::string model_dir;  // "" when unknown
};

// str / bytes / os.PathLike -> filesystem path (os.fspath semantics).
std::filesystem::path to_path(const py::handle& obj);

// Turns the global progress bar switch on/off for the lifetime of the object (restores it).
class ProgressScope {
 public:
  explicit ProgressScope(bool on) : saved_(Progress::enabled()) { Progress::set_enabled(on); }
  ~ProgressScope() { Progress::set_enabled(saved_); }
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;

 private:
  bool saved_;
};

void bind_tokenizer(py::module_& m);
void bind_plan(py::module_& m);
void bind_engine(py::module_& m);

}  // namespace g4c::python
