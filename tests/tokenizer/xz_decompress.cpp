// xz_decompress IN.xz OUT: writes the decompressed IN.xz to OUT through models/xz.h (liblzma),
// for the build steps that need tokenizers/gemma3/tokenizer.json as a plain file (the
// transformers.js reference script and the tokenizer speed benchmark).
#include <cstdio>
#include <fstream>

#include "models/error.h"
#include "models/xz.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: xz_decompress IN.xz OUT\n");
    return 2;
  }
  try {
    const std::string text = g4c::models::read_xz_file(argv[1]);
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out.write(text.data(), std::streamsize(text.size()));
    if (!out) throw g4c::Error(std::string(argv[2]) + ": write failed");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xz_decompress: %s\n", e.what());
    return 1;
  }
  return 0;
}
