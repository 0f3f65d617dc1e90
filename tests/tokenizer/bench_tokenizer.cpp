// Tokenizer speed: load time of a tokenizer.json and single-thread encode throughput
// over the "text" (or "prompt") fields of a jsonl file.
//   tokenizer_bench TOKENIZER.json DATA.jsonl [--min-mb-per-s X] [--max-load-s Y] [--repeat N]
// The optional floors turn it into a test (tokenizer.speed); they are set far below the
// measured numbers (README "Tokenizer") so that only an algorithmic regression (say, a
// quadratic BPE or a DOM-building JSON parse) trips them, not a busy shared CI core.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/error.h"
#include "models/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER.json DATA.jsonl [--min-mb-per-s X] [--max-load-s Y] [--repeat N]\n",
                 argv[0]);
    return 2;
  }
  double min_mb_per_s = 0, max_load_s = 0;
  int repeat = 3;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--min-mb-per-s") min_mb_per_s = std::atof(argv[i + 1]);
    else if (flag == "--max-load-s") max_load_s = std::atof(argv[i + 1]);
    else if (flag == "--repeat") repeat = std::atoi(argv[i + 1]);
  }
  using clock = std::chrono::steady_clock;
  const auto seconds = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  try {
    std::vector<std::string> texts;
    size_t bytes = 0;
    std::ifstream in(argv[2]);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto record = nlohmann::json::parse(line);
      texts.push_back(record.contains("text") ? record["text"] : record["prompt"]);
      bytes += texts.back().size();
    }
    if (texts.empty()) throw g4c::Error(std::string(argv[2]) + ": no texts");

    const auto t0 = clock::now();
    const auto tok = g4c::models::Tokenizer::load(argv[1]);
    const double load_s = seconds(t0, clock::now());

    // Best of `repeat` passes: the machine is shared, the minimum is the least disturbed.
    double best_s = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < repeat; ++r) {
      tokens = 0;
      const auto t1 = clock::now();
      for (const std::string& text : texts) tokens += tok->encode(text).size();
      best_s = std::min(best_s, seconds(t1, clock::now()));
    }
    const double mb_per_s = static_cast<double>(bytes) / 1e6 / best_s;
    std::printf("load %s: %.3f s (vocab %d)\n", argv[1], load_s, tok->vocab_size());
    std::printf("encode %s: %zu texts, %zu bytes, %zu tokens (BOS included) in %.3f s = %.2f MB/s, %.0f tokens/s "
                "(one thread, best of %d)\n",
                argv[2], texts.size(), bytes, tokens, best_s, mb_per_s, static_cast<double>(tokens) / best_s, repeat);
    int rc = 0;
    if (min_mb_per_s > 0 && mb_per_s < min_mb_per_s) {
      std::printf("FAIL: encode %.2f MB/s is below the floor %.2f MB/s\n", mb_per_s, min_mb_per_s);
      rc = 1;
    }
    if (max_load_s > 0 && load_s > max_load_s) {
      std::printf("FAIL: load %.3f s is above the ceiling %.3f s\n", load_s, max_load_s);
      rc = 1;
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
