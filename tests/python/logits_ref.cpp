// C++ side of tests/python/test_engine.py's byte-parity check: opens the model with the
// runtime Engine (reference plan, CPU backend) and writes Engine::logits() of the given
// token ids as raw little-endian float32 [T, vocab].
//   g4c_py_logits_ref MODEL_DIR THREADS CHUNK OUT.bin ID ID ...
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "runtime/engine.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL_DIR THREADS CHUNK OUT.bin ID...\n", argv[0]);
    return 2;
  }
  try {
    g4c::runtime::EngineOptions o;
    o.threads = std::atoi(argv[2]);
    const int chunk = std::atoi(argv[3]);
    std::vector<int32_t> ids;
    for (int i = 5; i < argc; ++i) ids.push_back(int32_t(std::atol(argv[i])));
    auto engine = g4c::runtime::Engine::open(argv[1], std::nullopt, o);
    const std::vector<float> x = engine->logits(ids, chunk);
    std::FILE* f = std::fopen(argv[4], "wb");
    if (!f || std::fwrite(x.data(), sizeof(float), x.size(), f) != x.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", argv[4]);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
