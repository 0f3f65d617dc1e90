// g4c.Engine / g4c.SamplingParams / g4c.Result / g4c.load_config: runtime/engine.h.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <charconv>
#include <mutex>

#include "common.h"
#include "models/config.h"
#include "models/error.h"
#include "models/tokenizer.h"
#include "runtime/engine.h"
#ifdef G4C_HAVE_CUDA_BACKEND
#include "runtime/cuda_backend/cuda_backend.h"
#endif

namespace g4c::python {

namespace {

using runtime::GenerationRequest;
using runtime::GenerationResult;
using runtime::SamplingParams;

// Shortest text that reads back as the same float ("0.7", "1.0").
std::string float_repr(float v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (s.find_first_of(".enia") == std::string::npos) s += ".0";
  return s;
}

py::dict config_dict(const models::ModelConfig& c) {
  py::dict d;
  d["model_type"] = c.model_type;
  d["hidden_size"] = c.hidden_size;
  d["num_layers"] = c.num_layers;
  d["num_q_heads"] = c.num_q_heads;
  d["intermediate_size"] = c.intermediate_size;
  d["vocab_size"] = c.vocab_size;
  d["head_dim"] = c.head_dim;
  d["num_kv_heads"] = c.num_kv_heads;
  d["global_head_dim"] = c.global_head_dim;
  d["num_global_kv_heads"] = c.num_global_kv_heads;
  d["attention_k_eq_v"] = c.attention_k_eq_v;
  d["sliding_window"] = c.sliding_window;
  d["rms_norm_eps"] = c.rms_norm_eps;
  d["final_logit_softcapping"] = c.final_logit_softcapping;
  d["tie_word_embeddings"] = c.tie_word_embeddings;
  d["max_position_embeddings"] = c.max_position_embeddings;
  py::list kinds;
  for (const auto& l : c.layers) kinds.append(l.kind == models::LayerKind::Full ? "full_attention" : "sliding_attention");
  d["layer_types"] = kinds;
  d["bos_token_id"] = c.bos_token_id;
  d["eos_token_ids"] = c.eos_token_ids;
  d["num_parameters"] = c.num_parameters();
  d["source"] = c.source;
  return d;
}

// One generation result with its decoded text.
struct Result {
  GenerationResult r;
  py::object text = py::none();
};

// The Python-side engine: the runtime engine, its tokenizer, and a lock (an Engine is
// single-threaded; calls release the GIL, so two Python threads could otherwise race).
struct PyEngine {
  std::unique_ptr<runtime::Engine> engine;
  std::shared_ptr<models::Tokenizer> tokenizer;  // null when the model has no tokenizer.json
  std::string model_dir, device;
  std::mutex mu;
};

SamplingParams sampling_from(const py::object& s) {
  if (s.is_none()) return {};
  if (py::isinstance<SamplingParams>(s)) return s.cast<SamplingParams>();
  if (py::isinstance<py::dict>(s)) {
    SamplingParams p;
    for (auto [k, v] : s.cast<py::dict>()) {
      const auto key = k.cast<std::string>();
      if (key == "temperature") p.temperature = v.cast<float>();
      else if (key == "top_k") p.top_k = v.cast<int>();
      else if (key == "top_p") p.top_p = v.cast<float>();
      else if (key == "seed") { if (!v.is_none()) p.seed = v.cast<uint64_t>(); }
      else throw Error("generate: unknown sampling key '" + key + "' (temperature, top_k, top_p, seed)");
    }
    return p;
  }
  throw Error("generate: sampling must be None, a dict or a g4c.SamplingParams");
}

// "cpu" | "cuda" | "cuda:N" -> backend (null: the engine's default CPU backend).
std::unique_ptr<runtime::Backend> make_backend(const std::string& device, const std::filesystem::path& model_dir,
                                               const py::object& emulate, const py::object& budget) {
  const bool cuda = device == "cuda" || device.rfind("cuda:", 0) == 0;
  if (device != "cpu" && !cuda) throw Error("Engine: device must be 'cpu', 'cuda' or 'cuda:N', not '" + device + "'");
  if (!cuda) {
    if (!emulate.is_none() || !budget.is_none()) throw Error("Engine: emulate= and budget= apply to device='cuda' only");
    return nullptr;
  }
#ifdef G4C_HAVE_CUDA_BACKEND
  runtime::CudaOptions co;
  co.model_dir = model_dir;
  if (device.size() > 5) {
    const std::string n = device.substr(5);
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos)
      throw Error("Engine: bad device '" + device + "' (cuda:N)");
    co.device = std::stoi(n);
  }
  if (!emulate.is_none()) co.emulate = emulate.cast<std::string>();
  if (!budget.is_none()) co.budget_bytes = runtime::parse_budget(py::str(budget).cast<std::string>());
  if (!runtime::cuda_device_available())
    throw Error("Engine: device '" + device + "': no usable CUDA device on this machine (no GPU or no driver)");
  return runtime::make_cuda_backend(co);
#else
  (void)model_dir;
  throw Error("Engine: device '" + device + "' is not available: this g4c module was built without the CUDA backend "
              "(no nvcc at build time) - use device='cpu'");
#endif
}

std::unique_ptr<PyEngine> open_engine(const py::object& what, const std::string& device, const py::object& model_dir,
                                      const runtime::EngineOptions& opts, const py::object& emulate,
                                      const py::object& budget) {
  auto e = std::make_unique<PyEngine>();
  e->device = device;
  std::optional<plan::Plan> plan;
  std::filesystem::path dir;
  if (!model_dir.is_none()) dir = to_path(model_dir);
  if (py::isinstance<PlanHandle>(what)) {
    const auto& h = what.cast<const PlanHandle&>();
    plan = *h.plan;
    if (dir.empty()) dir = h.model_dir;
    if (dir.empty())
      throw Error("Engine: the plan " + h.plan->name() + " does not record its model directory; pass model_dir=");
  } else {
    const auto p = to_path(what);
    if (std::filesystem::is_regular_file(p)) {  // a .g4p file
      if (dir.empty()) throw Error("Engine: " + p.string() + " is a plan file; pass the checkpoint as model_dir=");
      py::gil_scoped_release release;
      plan = plan::Plan::load_file(p);
    } else {
      if (!dir.empty() && dir != p) throw Error("Engine: model_dir= given twice (" + p.string() + ", " + dir.string() + ")");
      dir = p;
    }
  }
  e->model_dir = dir.string();
  auto backend = make_backend(device, dir, emulate, budget);
  py::gil_scoped_release release;
  e->engine = runtime::Engine::open(dir, std::move(plan), opts, std::move(backend));
  if (std::filesystem::exists(dir / "tokenizer.json")) e->tokenizer = models::Tokenizer::load(dir / "tokenizer.json");
  return e;
}

// prompts: str | list[int] | list[str | list[int]] -> token id lists.
std::vector<std::vector<int32_t>> prompt_ids(PyEngine& e, const py::object& prompts, bool add_bos) {
  auto encode = [&](const std::string& text) {
    if (!e.tokenizer) throw Error("generate: " + e.model_dir + " has no tokenizer.json; pass token id lists");
    return e.tokenizer->encode(text, add_bos);
  };
  std::vector<std::vector<int32_t>> out;
  if (py::isinstance<py::str>(prompts)) {
    out.push_back(encode(prompts.cast<std::string>()));
    return out;
  }
  const auto seq = prompts.cast<py::sequence>();
  const auto is_id = [](const py::handle& x) {  // int or numpy integer scalar, not a sequence
    return !py::isinstance<py::str>(x) && !py::isinstance<py::sequence>(x) && !py::isinstance<py::array>(x);
  };
  if (seq.size() > 0 && is_id(seq[0])) {  // one prompt as ids (list or 1-D numpy array)
    out.push_back(prompts.cast<std::vector<int32_t>>());
    return out;
  }
  for (const auto& p : seq) {
    if (py::isinstance<py::str>(p)) out.push_back(encode(p.cast<std::string>()));
    else out.push_back(p.cast<std::vector<int32_t>>());
  }
  return out;
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<SamplingParams>(m, "SamplingParams", R"doc(
Token sampling: greedy when temperature <= 0, else temperature with top-k / top-p
(nucleus) filtering and a per-request seeded generator (seed None: from the request index).

>>> g4c.SamplingParams(temperature=0.7, top_k=40, seed=1)
SamplingParams(temperature=0.7, top_k=40, top_p=1.0, seed=1)
)doc")
      .def(py::init([](float temperature, int top_k, float top_p, std::optional<uint64_t> seed) {
             SamplingParams p;
             p.temperature = temperature;
             p.top_k = top_k;
             p.top_p = top_p;
             p.seed = seed;
             return p;
           }),
           py::arg("temperature") = 0.0f, py::arg("top_k") = -1, py::arg("top_p") = 1.0f, py::arg("seed") = py::none())
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("seed", &SamplingParams::seed)
      .def("__repr__", [](const SamplingParams& p) {
        return "SamplingParams(temperature=" + float_repr(p.temperature) + ", top_k=" + std::to_string(p.top_k) +
               ", top_p=" + float_repr(p.top_p) +
               ", seed=" + (p.seed ? std::to_string(*p.seed) : std::string("None")) + ")";
      });

  py::class_<Result>(m, "Result", R"doc(
One finished request of Engine.generate(): token_ids (generated, stop token included when
hit), text (decoded, special tokens skipped; None without a tokenizer), finish_reason
("length" | "stop" | "error"), error, prompt_tokens, index, id and metrics (latencies in
seconds, preemptions).

>>> r = g4c.Engine(MODEL).generate(["Hello"], max_new_tokens=3)[0]
>>> len(r.token_ids), r.finish_reason, sorted(r.metrics)
(3, 'length', ['decode_latencies_s', 'generated_tokens', 'preemptions', 'prefill_latency_s', 'total_latency_s'])
)doc")
      .def_property_readonly("token_ids", [](const Result& r) { return r.r.tokens; })
      .def_property_readonly("text", [](const Result& r) { return r.text; })
      .def_property_readonly("finish_reason", [](const Result& r) { return r.r.finish_reason; })
      .def_property_readonly("error", [](const Result& r) { return r.r.error; })
      .def_property_readonly("prompt_tokens", [](const Result& r) { return r.r.prompt_tokens; })
      .def_property_readonly("index", [](const Result& r) { return r.r.index; })
      .def_property_readonly("id", [](const Result& r) { return r.r.id; })
      .def_property_readonly("metrics", [](const Result& r) {
        py::dict d;
        d["generated_tokens"] = r.r.tokens.size();
        d["prefill_latency_s"] = r.r.prefill_latency_s;
        d["decode_latencies_s"] = r.r.decode_latencies_s;
        d["total_latency_s"] = r.r.total_latency_s;
        d["preemptions"] = r.r.preemptions;
        return d;
      })
      .def("__repr__", [](const Result& r) {
        return "<g4c.Result index=" + std::to_string(r.r.index) + " tokens=" + std::to_string(r.r.tokens.size()) +
               " finish_reason=" + r.r.finish_reason + ">";
      });

  py::class_<PyEngine>(m, "Engine", R"doc(
A loaded model on a backend: Engine(plan_or_model_dir, device="cpu", *, model_dir=None,
max_sequences=8, max_seq_len=2048, token_budget=0, chunk_tokens=0, kv_blocks=0, threads=0,
emulate=None, budget=None).

plan_or_model_dir is a checkpoint directory (the runtime's reference plan is built for
it), a g4c.Plan, or a .g4p file (then model_dir= names the checkpoint). The plan is
verified against the checkpoint before any weight is read. device: "cpu" (the reference
backend), "cuda" or "cuda:N" (the CUDA backend; emulate="1g.10gb" runs in a 16-SM green
context, budget="9984MiB" caps device memory). Without a usable GPU (or in a build without
nvcc) device="cuda" raises g4c.Error saying so. Other options are those of `g4c run`
(0: automatic).

>>> engine = g4c.Engine(MODEL, threads=2)
>>> engine.device, engine.vocab_size, engine.config["num_layers"]
('cpu', 8192, 12)
>>> g4c.Engine("/no/such/model")
Traceback (most recent call last):
...
g4c.Error: .../no/such/model...
)doc")
      .def(py::init([](const py::object& what, const std::string& device, const py::object& model_dir,
                       int max_sequences, int max_seq_len, int token_budget, int chunk_tokens, int kv_blocks,
                       int threads, const py::object& emulate, const py::object& budget) {
             runtime::EngineOptions o;
             o.max_sequences = max_sequences;
             o.max_seq_len = max_seq_len;
             o.token_budget = token_budget;
             o.chunk_tokens = chunk_tokens;
             o.kv_blocks = kv_blocks;
             o.threads = threads;
             return open_engine(what, device, model_dir, o, emulate, budget);
           }),
           py::arg("plan_or_model_dir"), py::arg("device") = "cpu", py::kw_only(), py::arg("model_dir") = py::none(),
           py::arg("max_sequences") = 8, py::arg("max_seq_len") = 2048, py::arg("token_budget") = 0,
           py::arg("chunk_tokens") = 0, py::arg("kv_blocks") = 0, py::arg("threads") = 0,
           py::arg("emulate") = py::none(), py::arg("budget") = py::none())
      .def(
          "logits",
          [](PyEngine& e, const py::array_t<int32_t, py::array::c_style | py::array::forcecast>& ids, int chunk) {
            if (ids.ndim() != 1) throw Error("logits: token_ids must be one sequence (1-D), got " +
                                             std::to_string(ids.ndim()) + "-D");
            std::vector<int32_t> tokens(ids.data(), ids.data() + ids.shape(0));
            auto* rows = new std::vector<float>();
            try {
              py::gil_scoped_release release;
              std::lock_guard lock(e.mu);
              *rows = e.engine->logits(tokens, chunk);
            } catch (...) {
              delete rows;
              throw;
            }
            // Zero-copy: the array views the engine's vector, owned by a capsule.
            py::capsule owner(rows, [](void* p) { delete static_cast<std::vector<float>*>(p); });
            const py::ssize_t T = py::ssize_t(tokens.size()), V = e.engine->vocab_size();
            return py::array_t<float>({T, V}, {V * py::ssize_t(sizeof(float)), py::ssize_t(sizeof(float))},
                                      rows->data(), owner);
          },
          py::arg("token_ids"), py::arg("chunk") = 0, R"doc(
Softcapped fp32 logits of EVERY position, a numpy float32 array [len(token_ids), vocab]
(no copy: the array owns the engine's buffer). The sequence is fed through the KV cache
in chunks of `chunk` tokens (0: the plan's maximum). Log-softmax is the caller's.

>>> engine = g4c.Engine(MODEL, threads=2)
>>> x = engine.logits([2, 304, 726, 732, 3723])
>>> x.shape, x.dtype
((5, 8192), dtype('float32'))
>>> int(x[-1].argmax()) == engine.generate([[2, 304, 726, 732, 3723]], max_new_tokens=1)[0].token_ids[0]
True
)doc")
      .def(
          "generate",
          [](PyEngine& e, const py::object& prompts, int max_new_tokens, const py::object& sampling,
             const std::vector<int32_t>& stop_token_ids, bool ignore_eos, bool add_bos, const std::string& errors,
             bool progress) {
            if (errors != "raise" && errors != "return")
              throw Error("generate: errors must be 'raise' or 'return', not '" + errors + "'");
            const SamplingParams sp = sampling_from(sampling);
            auto ids = prompt_ids(e, prompts, add_bos);
            std::vector<GenerationRequest> reqs(ids.size());
            for (size_t i = 0; i < ids.size(); ++i) {
              reqs[i].id = std::to_string(i);
              reqs[i].prompt = std::move(ids[i]);
              reqs[i].max_new_tokens = max_new_tokens;
              reqs[i].stop_token_ids = stop_token_ids;
              reqs[i].ignore_eos = ignore_eos;
              reqs[i].sampling = sp;
            }
            std::vector<GenerationResult> raw;
            {
              py::gil_scoped_release release;
              std::lock_guard lock(e.mu);
              ProgressScope scope(progress);
              std::unique_ptr<Progress> bar;
              if (progress) bar = std::make_unique<Progress>("generate", reqs.size());
              raw = e.engine->generate(std::move(reqs), [&](const GenerationResult&) {
                if (bar) bar->add(1);
              });
            }
            std::vector<Result> out(raw.size());
            for (size_t i = 0; i < raw.size(); ++i) {
              if (raw[i].finish_reason == "error" && errors == "raise") throw Error(raw[i].error);
              out[i].r = std::move(raw[i]);
              if (e.tokenizer && out[i].r.finish_reason != "error") {
                std::string text;
                {
                  py::gil_scoped_release release;
                  text = e.tokenizer->decode(out[i].r.tokens, true);
                }
                out[i].text = py::str(text);
              }
            }
            return out;
          },
          py::arg("prompts"), py::arg("max_new_tokens") = 32, py::arg("sampling") = py::none(),
          py::arg("stop_token_ids") = std::vector<int32_t>{}, py::arg("ignore_eos") = false,
          py::arg("add_bos") = true, py::arg("errors") = "raise", py::arg("progress") = false, R"doc(
Runs every prompt to completion under the continuous-batching scheduler and returns a
list of g4c.Result in input order. prompts: a str, a list of token ids, or a list of
those (text is encoded with the model's tokenizer, BOS prepended when add_bos).
sampling: None (greedy), a dict or a g4c.SamplingParams. Generation stops at
max_new_tokens, an EOS id of generation_config.json (unless ignore_eos) or one of
stop_token_ids. A bad request raises g4c.Error (errors="return": its Result has
finish_reason "error" instead). progress=True shows a bar on stderr.

>>> engine = g4c.Engine(MODEL, threads=2)
>>> a, b = engine.generate(["Hello world", [2, 304]], max_new_tokens=4)
>>> len(a.token_ids), len(b.token_ids), a.prompt_tokens, b.prompt_tokens
(4, 4, 5, 2)
>>> engine.generate([[2, 99999]], max_new_tokens=4)
Traceback (most recent call last):
...
g4c.Error: request 0: token id 99999 at position 1 is outside the vocabulary (8192)
)doc")
      .def_property_readonly("config", [](const PyEngine& e) { return config_dict(e.engine->config()); },
                             "The model configuration (dict).")
      .def_property_readonly("plan", [](const PyEngine& e) {
        return PlanHandle{std::make_shared<const plan::Plan>(e.engine->plan()), e.model_dir};
      }, "The plan this engine runs (a copy).")
      .def_property_readonly("tokenizer", [](const PyEngine& e) -> py::object {
        if (!e.tokenizer) return py::none();
        return py::cast(e.tokenizer);
      }, "The model's g4c.Tokenizer (None without tokenizer.json).")
      .def_property_readonly("vocab_size", [](const PyEngine& e) { return e.engine->vocab_size(); })
      .def_property_readonly("device", [](const PyEngine& e) { return e.device; })
      .def_property_readonly("model_dir", [](const PyEngine& e) { return e.model_dir; })
      .def_property_readonly("stats", [](const PyEngine& e) {
        py::dict d;
        d["steps"] = e.engine->stats().steps;
        d["preemptions"] = e.engine->stats().preemptions;
        d["tokens_computed"] = e.engine->stats().tokens_computed;
        return d;
      }, "Totals since the engine was opened: steps, preemptions, tokens_computed.")
      .def("__repr__", [](const PyEngine& e) {
        return "<g4c.Engine " + e.model_dir + " device=" + e.device + ">";
      });

  m.def(
      "cuda_available",
      [] {
#ifdef G4C_HAVE_CUDA_BACKEND
        py::gil_scoped_release release;
        return runtime::cuda_device_available();
#else
        return false;
#endif
      },
      R"doc(
True when this module has the CUDA backend and a CUDA device can be used.

>>> g4c.cuda_available() in (True, False)
True
)doc");

  m.def(
      "load_config",
      [](const py::object& model_dir) { return config_dict(models::load_model_config(to_path(model_dir))); },
      py::arg("model_dir"), R"doc(
The normalised Gemma 4 configuration of a model directory (config.json +
generation_config.json) as a dict. Raises g4c.Error naming the file on a bad config.

>>> cfg = g4c.load_config(MODEL)
>>> cfg["vocab_size"], cfg["layer_types"][:2]
(8192, ['sliding_attention', 'sliding_attention'])
)doc");
}

}  // namespace g4c::python
