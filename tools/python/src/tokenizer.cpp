// g4c.Tokenizer: models/tokenizer.h (Hugging Face tokenizer.json BPE as Gemma uses it).
#include <pybind11/stl.h>

#include "common.h"
#include "models/tokenizer.h"

namespace g4c::python {

namespace {

std::filesystem::path tokenizer_file(const std::filesystem::path& p) {
  // A model directory names its tokenizer.json.
  if (std::filesystem::is_directory(p)) return p / "tokenizer.json";
  return p;
}

}  // namespace

void bind_tokenizer(py::module_& m) {
  using models::Tokenizer;
  py::class_<Tokenizer, std::shared_ptr<Tokenizer>>(m, "Tokenizer", R"doc(
A Hugging Face tokenizer.json (BPE, as Gemma 3/4 use it).

Tokenizer(path): `path` is a tokenizer.json file or a model directory holding one.
Raises g4c.Error naming the file when it is missing or not a supported tokenizer.

>>> tok = g4c.Tokenizer(MODEL)
>>> tok.vocab_size, tok.bos_id, tok.eos_id
(8192, 2, 1)
)doc")
      .def(py::init([](const py::object& path) {
             const auto file = tokenizer_file(to_path(path));
             std::unique_ptr<Tokenizer> t;
             {
               py::gil_scoped_release release;
               t = Tokenizer::load(file);
             }
             return std::shared_ptr<Tokenizer>(std::move(t));
           }),
           py::arg("path"))
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_bos) {
            py::gil_scoped_release release;
            return t.encode(text, add_bos);
          },
          py::arg("text"), py::arg("add_bos") = true, R"doc(
Token ids of `text` (list[int]). add_bos=True prepends BOS like Hugging Face's
add_special_tokens=True; special tokens written in the text ("<bos>") are matched.

>>> g4c.Tokenizer(MODEL).encode("Hello world")
[2, 304, 726, 732, 3723]
>>> g4c.Tokenizer(MODEL).encode("Hello world", add_bos=False)
[304, 726, 732, 3723]
)doc")
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special) {
            py::gil_scoped_release release;
            return t.decode(ids, skip_special);
          },
          py::arg("ids"), py::arg("skip_special") = true, R"doc(
Text of token ids. skip_special=True drops special tokens (bos, eos, pad...).
Raises g4c.Error for an id outside the vocabulary.

>>> tok = g4c.Tokenizer(MODEL)
>>> tok.decode([2, 304, 726, 732, 3723])
'Hello world'
>>> tok.decode([2, 304, 726, 732, 3723], skip_special=False)
'<bos>Hello world'
)doc")
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"), R"doc(
Id of a token string, -1 when it is not in the vocabulary.

>>> g4c.Tokenizer(MODEL).token_to_id("<eos>")
1
)doc")
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"), R"doc(
Token string of an id ("" for an id with no token).

>>> g4c.Tokenizer(MODEL).id_to_token(2)
'<bos>'
)doc")
      .def("is_special", &Tokenizer::is_special, py::arg("id"), R"doc(
True for special tokens (bos, eos, pad, ...).

>>> g4c.Tokenizer(MODEL).is_special(2), g4c.Tokenizer(MODEL).is_special(304)
(True, False)
)doc")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size, "One past the largest token id.")
      .def_property_readonly("bos_id", &Tokenizer::bos_id, "BOS id (-1 if none).")
      .def_property_readonly("eos_id", &Tokenizer::eos_id, "EOS id (-1 if none).")
      .def("__repr__", [](const Tokenizer& t) {
        return "<g4c.Tokenizer vocab_size=" + std::to_string(t.vocab_size()) + ">";
      });
}

}  // namespace g4c::python
