// A tiny RGB canvas and PNG writer for `g4c bench --plot` (the C++ build has no plotting
// library). PNG: 8-bit RGB, filter 0, one IDAT chunk compressed by zlib; chunk CRCs by zlib.
// Text: a built-in 5x7 bitmap font (most printable ASCII; others draw as a box), drawn at an integer scale.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace g4c::bench {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background = {255, 255, 255});
  int width() const { return w_; }
  int height() const { return h_; }
  void fill_rect(int x, int y, int w, int h, Rgb c);  // clipped to the canvas
  void hline(int x0, int x1, int y, Rgb c) { fill_rect(x0, y, x1 - x0 + 1, 1, c); }
  void vline(int x, int y0, int y1, Rgb c) { fill_rect(x, y0, 1, y1 - y0 + 1, c); }
  // Text with its top-left corner at (x, y); each glyph is 6*scale wide, 8*scale tall.
  void text(int x, int y, std::string_view s, Rgb c, int scale = 2);
  static int text_width(std::string_view s, int scale = 2) { return int(s.size()) * 6 * scale; }
  const std::vector<uint8_t>& pixels() const { return px_; }  // RGB rows

 private:
  int w_, h_;
  std::vector<uint8_t> px_;
};

std::vector<uint8_t> encode_png(const Canvas& c);
void write_png(const Canvas& c, const std::filesystem::path& path);  // throws g4c::Error

}  // namespace g4c::bench
