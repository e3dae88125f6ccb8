//===- Canvas.h - a pixel canvas written as PNG (pipe-run, pipe-timeline) -===//
//
// Rectangles, lines and 5x7 text on an RGB canvas, encoded as PNG with
// zlib: what pipe-run --plot and pipe-timeline draw with, so that neither
// needs Python.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TOOLS_COMMON_CANVAS_H
#define PIPEC_TOOLS_COMMON_CANVAS_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace pipec {

struct Rgb {
  uint8_t r, g, b;
};

inline constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0},
    kGrid{225, 225, 225}, kCurve{31, 119, 180}, kGap{214, 39, 40},
    kEval{255, 127, 14}, kAccuracy{44, 160, 44};

class Canvas {
public:
  Canvas(int w, int h) : w(w), h(h), px(size_t(w) * h, kWhite) {}
  int width() const { return w; }
  int height() const { return h; }

  void set(int x, int y, Rgb c) {
    if (x >= 0 && y >= 0 && x < w && y < h)
      px[size_t(y) * w + x] = c;
  }
  void hline(int x0, int x1, int y, Rgb c) {
    for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x)
      set(x, y, c);
  }
  void vline(int x, int y0, int y1, Rgb c) {
    for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y)
      set(x, y, c);
  }
  /// A 2-pixel-wide line (Bresenham, doubled vertically).
  void line(int x0, int y0, int x1, int y1, Rgb c) {
    int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    int dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      set(x0, y0, c);
      set(x0, y0 + 1, c);
      if (x0 == x1 && y0 == y1)
        break;
      int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
  void text(int x, int y, const std::string &s, Rgb c, int scale = 1);
  int textWidth(const std::string &s, int scale = 1) const {
    return int(s.size()) * 6 * scale - scale;
  }

  void fill(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y)
      hline(x0, x1, y, c);
  }
  /// The PNG file: 8-bit RGB, no interlace, filter 0 per row.
  std::string png() const;

private:
  int w, h;
  std::vector<Rgb> px;
};

} // namespace pipec

#endif // PIPEC_TOOLS_COMMON_CANVAS_H
