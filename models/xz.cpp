// .xz decompression with liblzma (see xz.h).
#include "models/xz.h"

#include <lzma.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "models/error.h"

namespace g4c::models {

namespace {
std::string lzma_message(lzma_ret r) {
  switch (r) {
    case LZMA_MEM_ERROR: return "out of memory";
    case LZMA_FORMAT_ERROR: return "not in the .xz format";
    case LZMA_OPTIONS_ERROR: return "unsupported .xz options";
    case LZMA_DATA_ERROR: return "corrupt .xz data";
    case LZMA_BUF_ERROR: return "truncated .xz data";
    default: return "liblzma error " + std::to_string(int(r));
  }
}
}  // namespace

std::string read_xz_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(name.c_str(), "rb"), &std::fclose);
  if (!f) throw Error(name + ": cannot open");
  lzma_stream s = LZMA_STREAM_INIT;
  lzma_ret r = lzma_stream_decoder(&s, UINT64_MAX, LZMA_CONCATENATED);
  if (r != LZMA_OK) throw Error(name + ": " + lzma_message(r));
  std::unique_ptr<lzma_stream, void (*)(lzma_stream*)> guard(&s, &lzma_end);
  std::vector<uint8_t> in(1 << 16);
  std::string out;
  std::vector<char> buf(1 << 20);
  lzma_action action = LZMA_RUN;
  while (true) {
    if (s.avail_in == 0 && action == LZMA_RUN) {
      s.next_in = in.data();
      s.avail_in = std::fread(in.data(), 1, in.size(), f.get());
      if (std::ferror(f.get())) throw Error(name + ": read error");
      if (std::feof(f.get())) action = LZMA_FINISH;
    }
    s.next_out = reinterpret_cast<uint8_t*>(buf.data());
    s.avail_out = buf.size();
    r = lzma_code(&s, action);
    out.append(buf.data(), buf.size() - s.avail_out);
    if (r == LZMA_STREAM_END) return out;
    if (r != LZMA_OK) throw Error(name + ": " + lzma_message(r));
  }
}

}  // namespace g4c::models
