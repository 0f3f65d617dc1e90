// PNG writer and 5x7 bitmap font for `g4c bench --plot` (see bench_png.h).
#include "tools/bench_png.h"

#include <algorithm>
#include <array>
#include <fstream>

#include "models/error.h"

namespace g4c::bench {
namespace {

// 5x7 glyphs (+ a descender row for g j p q y), column-major: 5 bytes per glyph, bit 0 = top
// row, bit 7 = descender (the classic "glcdfont" layout).
struct Glyph {
  char c;
  uint8_t col[5];
};
constexpr Glyph kFont[] = {
    {' ', {0x00, 0x00, 0x00, 0x00, 0x00}}, {'!', {0x00, 0x00, 0x5F, 0x00, 0x00}},
    {'#', {0x14, 0x7F, 0x14, 0x7F, 0x14}}, {'%', {0x23, 0x13, 0x08, 0x64, 0x62}},
    {'\'', {0x00, 0x05, 0x03, 0x00, 0x00}}, {'(', {0x00, 0x1C, 0x22, 0x41, 0x00}},
    {')', {0x00, 0x41, 0x22, 0x1C, 0x00}}, {'*', {0x08, 0x2A, 0x1C, 0x2A, 0x08}},
    {'+', {0x08, 0x08, 0x3E, 0x08, 0x08}}, {',', {0x00, 0x50, 0x30, 0x00, 0x00}},
    {'-', {0x08, 0x08, 0x08, 0x08, 0x08}}, {'.', {0x00, 0x60, 0x60, 0x00, 0x00}},
    {'/', {0x20, 0x10, 0x08, 0x04, 0x02}}, {'0', {0x3E, 0x51, 0x49, 0x45, 0x3E}},
    {'1', {0x00, 0x42, 0x7F, 0x40, 0x00}}, {'2', {0x42, 0x61, 0x51, 0x49, 0x46}},
    {'3', {0x21, 0x41, 0x45, 0x4B, 0x31}}, {'4', {0x18, 0x14, 0x12, 0x7F, 0x10}},
    {'5', {0x27, 0x45, 0x45, 0x45, 0x39}}, {'6', {0x3C, 0x4A, 0x49, 0x49, 0x30}},
    {'7', {0x01, 0x71, 0x09, 0x05, 0x03}}, {'8', {0x36, 0x49, 0x49, 0x49, 0x36}},
    {'9', {0x06, 0x49, 0x49, 0x29, 0x1E}}, {':', {0x00, 0x36, 0x36, 0x00, 0x00}},
    {'<', {0x08, 0x14, 0x22, 0x41, 0x00}}, {'=', {0x14, 0x14, 0x14, 0x14, 0x14}},
    {'>', {0x00, 0x41, 0x22, 0x14, 0x08}}, {'A', {0x7E, 0x11, 0x11, 0x11, 0x7E}},
    {'B', {0x7F, 0x49, 0x49, 0x49, 0x36}}, {'C', {0x3E, 0x41, 0x41, 0x41, 0x22}},
    {'D', {0x7F, 0x41, 0x41, 0x22, 0x1C}}, {'E', {0x7F, 0x49, 0x49, 0x49, 0x41}},
    {'F', {0x7F, 0x09, 0x09, 0x09, 0x01}}, {'G', {0x3E, 0x41, 0x49, 0x49, 0x7A}},
    {'H', {0x7F, 0x08, 0x08, 0x08, 0x7F}}, {'I', {0x00, 0x41, 0x7F, 0x41, 0x00}},
    {'J', {0x20, 0x40, 0x41, 0x3F, 0x01}}, {'K', {0x7F, 0x08, 0x14, 0x22, 0x41}},
    {'L', {0x7F, 0x40, 0x40, 0x40, 0x40}}, {'M', {0x7F, 0x02, 0x0C, 0x02, 0x7F}},
    {'N', {0x7F, 0x04, 0x08, 0x10, 0x7F}}, {'O', {0x3E, 0x41, 0x41, 0x41, 0x3E}},
    {'P', {0x7F, 0x09, 0x09, 0x09, 0x06}}, {'Q', {0x3E, 0x41, 0x51, 0x21, 0x5E}},
    {'R', {0x7F, 0x09, 0x19, 0x29, 0x46}}, {'S', {0x46, 0x49, 0x49, 0x49, 0x31}},
    {'T', {0x01, 0x01, 0x7F, 0x01, 0x01}}, {'U', {0x3F, 0x40, 0x40, 0x40, 0x3F}},
    {'V', {0x1F, 0x20, 0x40, 0x20, 0x1F}}, {'W', {0x3F, 0x40, 0x38, 0x40, 0x3F}},
    {'X', {0x63, 0x14, 0x08, 0x14, 0x63}}, {'Y', {0x07, 0x08, 0x70, 0x08, 0x07}},
    {'Z', {0x61, 0x51, 0x49, 0x45, 0x43}}, {'[', {0x00, 0x7F, 0x41, 0x41, 0x00}},
    {']', {0x00, 0x41, 0x41, 0x7F, 0x00}}, {'_', {0x40, 0x40, 0x40, 0x40, 0x40}},
    {'a', {0x20, 0x54, 0x54, 0x54, 0x78}}, {'b', {0x7F, 0x48, 0x44, 0x44, 0x38}},
    {'c', {0x38, 0x44, 0x44, 0x44, 0x20}}, {'d', {0x38, 0x44, 0x44, 0x48, 0x7F}},
    {'e', {0x38, 0x54, 0x54, 0x54, 0x18}}, {'f', {0x08, 0x7E, 0x09, 0x01, 0x02}},
    {'g', {0x18, 0xA4, 0xA4, 0xA4, 0x7C}}, {'h', {0x7F, 0x08, 0x04, 0x04, 0x78}},
    {'i', {0x00, 0x44, 0x7D, 0x40, 0x00}}, {'j', {0x40, 0x80, 0x84, 0x7D, 0x00}},
    {'k', {0x7F, 0x10, 0x28, 0x44, 0x00}}, {'l', {0x00, 0x41, 0x7F, 0x40, 0x00}},
    {'m', {0x7C, 0x04, 0x18, 0x04, 0x78}}, {'n', {0x7C, 0x08, 0x04, 0x04, 0x78}},
    {'o', {0x38, 0x44, 0x44, 0x44, 0x38}}, {'p', {0xFC, 0x24, 0x24, 0x24, 0x18}},
    {'q', {0x18, 0x24, 0x24, 0x24, 0xFC}}, {'r', {0x7C, 0x08, 0x04, 0x04, 0x08}},
    {'s', {0x48, 0x54, 0x54, 0x54, 0x20}}, {'t', {0x04, 0x3F, 0x44, 0x40, 0x20}},
    {'u', {0x3C, 0x40, 0x40, 0x20, 0x7C}}, {'v', {0x1C, 0x20, 0x40, 0x20, 0x1C}},
    {'w', {0x3C, 0x40, 0x30, 0x40, 0x3C}}, {'x', {0x44, 0x28, 0x10, 0x28, 0x44}},
    {'y', {0x9C, 0xA0, 0xA0, 0xA0, 0x7C}}, {'z', {0x44, 0x64, 0x54, 0x4C, 0x44}},
    {'|', {0x00, 0x00, 0x7F, 0x00, 0x00}},
    {'?', {0x02, 0x01, 0x51, 0x09, 0x06}}, {';', {0x00, 0x56, 0x36, 0x00, 0x00}},
    {'~', {0x08, 0x04, 0x08, 0x10, 0x08}}, {'"', {0x00, 0x07, 0x00, 0x07, 0x00}},
};
constexpr uint8_t kUnknown[5] = {0x7F, 0x41, 0x41, 0x41, 0x7F};  // a box

const uint8_t* glyph(char c) {
  for (const auto& g : kFont)
    if (g.c == c) return g.col;
  return kUnknown;
}

// LSB-first bit writer (deflate order).
struct Bits {
  std::vector<uint8_t>& out;
  uint32_t acc = 0;
  int n = 0;
  void put(uint32_t v, int bits) {
    acc |= v << n;
    n += bits;
    while (n >= 8) {
      out.push_back(uint8_t(acc));
      acc >>= 8;
      n -= 8;
    }
  }
  // Huffman codes go MSB first.
  void code(uint32_t c, int bits) {
    uint32_t r = 0;
    for (int i = 0; i < bits; ++i) r |= ((c >> i) & 1u) << (bits - 1 - i);
    put(r, bits);
  }
  void flush() {
    if (n > 0) out.push_back(uint8_t(acc));
    acc = 0;
    n = 0;
  }
};

// Fixed Huffman literal/length code of symbol 0..287 (RFC 1951 §3.2.6).
void put_symbol(Bits& b, int s) {
  if (s < 144) b.code(0x30 + s, 8);
  else if (s < 256) b.code(0x190 + (s - 144), 9);
  else if (s < 280) b.code(s - 256, 7);
  else b.code(0xC0 + (s - 280), 8);
}

constexpr int kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                              31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr int kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};

void put_match(Bits& b, int len, int dist) {
  int c = 28;
  while (kLenBase[c] > len) --c;
  put_symbol(b, 257 + c);
  if (kLenExtra[c]) b.put(uint32_t(len - kLenBase[c]), kLenExtra[c]);
  b.code(uint32_t(dist - 1), 5);  // distance codes 0..3 are distances 1..4, no extra bits
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
}

void put_chunk(std::vector<uint8_t>& png, const char type[4], std::span<const uint8_t> data) {
  put_be32(png, uint32_t(data.size()));
  const size_t start = png.size();
  png.insert(png.end(), type, type + 4);
  png.insert(png.end(), data.begin(), data.end());
  put_be32(png, crc32(std::span<const uint8_t>(png.data() + start, png.size() - start)));
}

}  // namespace

Canvas::Canvas(int width, int height, Rgb bg) : w_(width), h_(height), px_(size_t(width) * height * 3) {
  for (size_t i = 0; i < px_.size(); i += 3) {
    px_[i] = bg.r;
    px_[i + 1] = bg.g;
    px_[i + 2] = bg.b;
  }
}

void Canvas::fill_rect(int x, int y, int w, int h, Rgb c) {
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(w_, x + w), y1 = std::min(h_, y + h);
  for (int yy = y0; yy < y1; ++yy)
    for (int xx = x0; xx < x1; ++xx) {
      uint8_t* p = &px_[(size_t(yy) * w_ + xx) * 3];
      p[0] = c.r;
      p[1] = c.g;
      p[2] = c.b;
    }
}

void Canvas::text(int x, int y, std::string_view s, Rgb c, int scale) {
  for (char ch : s) {
    const uint8_t* g = glyph(ch);
    for (int col = 0; col < 5; ++col)
      for (int row = 0; row < 8; ++row)
        if (g[col] >> row & 1) fill_rect(x + col * scale, y + row * scale, scale, scale, c);
    x += 6 * scale;
  }
}

uint32_t crc32(std::span<const uint8_t> data, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (uint8_t b : data) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(std::span<const uint8_t> data) {
  uint32_t a = 1, b = 0;
  for (uint8_t x : data) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

std::vector<uint8_t> zlib_compress(std::span<const uint8_t> raw) {
  std::vector<uint8_t> out = {0x78, 0x01};  // deflate, 32 KiB window, no dict; 0x7801 % 31 == 0
  Bits b{out};
  b.put(1, 1);  // BFINAL
  b.put(1, 2);  // BTYPE 01: fixed Huffman
  const size_t n = raw.size();
  for (size_t i = 0; i < n;) {
    int best = 0, best_d = 0;
    for (int d : {3, 1}) {
      if (i < size_t(d)) continue;
      int len = 0;
      while (len < 258 && i + len < n && raw[i + len] == raw[i + len - d]) ++len;
      if (len > best) best = len, best_d = d;
    }
    if (best >= 3) {
      put_match(b, best, best_d);
      i += size_t(best);
    } else {
      put_symbol(b, raw[i]);
      ++i;
    }
  }
  put_symbol(b, 256);
  b.flush();
  put_be32(out, adler32(raw));
  return out;
}

std::vector<uint8_t> encode_png(const Canvas& c) {
  std::vector<uint8_t> raw;
  raw.reserve((size_t(c.width()) * 3 + 1) * c.height());
  for (int y = 0; y < c.height(); ++y) {
    raw.push_back(0);  // filter: none
    const auto* row = c.pixels().data() + size_t(y) * c.width() * 3;
    raw.insert(raw.end(), row, row + size_t(c.width()) * 3);
  }
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, uint32_t(c.width()));
  put_be32(ihdr, uint32_t(c.height()));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit, RGB, deflate, filter 0, no interlace
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", zlib_compress(raw));
  put_chunk(png, "IEND", {});
  return png;
}

void write_png(const Canvas& c, const std::filesystem::path& path) {
  const auto png = encode_png(c);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(path.string() + ": cannot write PNG");
  f.write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  if (!f) throw Error(path.string() + ": write failed");
}

}  // namespace g4c::bench
