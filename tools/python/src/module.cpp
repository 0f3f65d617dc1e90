// The `g4c._g4c` extension module: error type, tokenizer, plans, engine.
// The package `g4c` (tools/python/g4c/__init__.py) re-exports everything from here and adds
// the CLI-backed calls (compile, quantize, evaluate).
#include <pybind11/pybind11.h>

#include "common.h"
#include "models/error.h"

namespace g4c::python {

std::filesystem::path to_path(const py::handle& obj) {
  py::object s = py::module_::import("os").attr("fspath")(obj);
  if (py::isinstance<py::bytes>(s)) return std::filesystem::path(s.cast<std::string>());
  return std::filesystem::path(s.cast<std::string>());
}

}  // namespace g4c::python

PYBIND11_MODULE(_g4c, m) {
  namespace py = pybind11;
  m.doc() = "g4c: compiler and runtime for Gemma 4 text models (C++ bindings)";
  // g4c::Error (bad input: files, requests, plans) -> g4c.Error, a RuntimeError whose
  // message is exactly the CLI's (the CLI prints "error: <message>").
  py::register_exception<g4c::Error>(m, "Error", PyExc_RuntimeError);
  g4c::python::bind_tokenizer(m);
  g4c::python::bind_plan(m);
  g4c::python::bind_engine(m);
}
