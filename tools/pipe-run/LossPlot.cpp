//===- LossPlot.cpp - pipe-run --plot: the loss curve as a PNG ------------===//
#include "LossPlot.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <zlib.h>

namespace pipec {
namespace {

struct Rgb {
  uint8_t r, g, b;
};

constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrid{225, 225, 225},
    kCurve{31, 119, 180}, kGap{214, 39, 40};

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

  /// The PNG file: 8-bit RGB, no interlace, filter 0 per row.
  std::string png() const;

private:
  int w, h;
  std::vector<Rgb> px;
};

/// 5x7 glyphs, one row per byte, bit 4 the leftmost pixel.
const uint8_t *glyph(char ch) {
  struct G {
    char c;
    uint8_t rows[7];
  };
  static const G font[] = {
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}},
      {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}},
      {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}},
      {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}},
      {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}},
      {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}},
      {'-', {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00}},
      {'+', {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}},
      {':', {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}},
      {'/', {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}},
      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
      {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
      {',', {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08}},
      {'a', {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},
      {'c', {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E}},
      {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
      {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},
      {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
      {'g', {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
      {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'i', {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}},
      {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}},
      {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'m', {0x00, 0x00, 0x1A, 0x15, 0x15, 0x11, 0x11}},
      {'n', {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'o', {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}},
      {'p', {0x00, 0x00, 0x1E, 0x11, 0x1E, 0x10, 0x10}},
      {'r', {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}},
      {'s', {0x00, 0x00, 0x0E, 0x10, 0x0E, 0x01, 0x1E}},
      {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
      {'u', {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D}},
      {'v', {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'w', {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A}},
      {'x', {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
      {'y', {0x00, 0x00, 0x11, 0x11, 0x0F, 0x01, 0x0E}},
  };
  for (const G &g : font)
    if (g.c == ch)
      return g.rows;
  return nullptr;
}

void Canvas::text(int x, int y, const std::string &s, Rgb c, int scale) {
  for (char ch : s) {
    if (const uint8_t *rows = glyph(ch))
      for (int r = 0; r < 7; ++r)
        for (int b = 0; b < 5; ++b)
          if (rows[r] & (0x10 >> b))
            for (int i = 0; i < scale; ++i)
              for (int j = 0; j < scale; ++j)
                set(x + b * scale + i, y + r * scale + j, c);
    x += 6 * scale;
  }
}

void put32(std::string &s, uint32_t v) {
  for (int i = 3; i >= 0; --i)
    s.push_back(char((v >> (8 * i)) & 0xFF));
}

void chunk(std::string &out, const char *type, const std::string &data) {
  put32(out, uint32_t(data.size()));
  std::string body(type, 4);
  body += data;
  out += body;
  put32(out, uint32_t(crc32(0, reinterpret_cast<const Bytef *>(body.data()),
                            uInt(body.size()))));
}

std::string Canvas::png() const {
  std::string raw;
  raw.reserve(size_t(h) * (1 + 3 * size_t(w)));
  for (int y = 0; y < h; ++y) {
    raw.push_back(0);
    for (int x = 0; x < w; ++x) {
      const Rgb &c = px[size_t(y) * w + x];
      raw.push_back(char(c.r));
      raw.push_back(char(c.g));
      raw.push_back(char(c.b));
    }
  }
  uLongf size = compressBound(uLong(raw.size()));
  std::string z(size, '\0');
  compress2(reinterpret_cast<Bytef *>(z.data()), &size,
            reinterpret_cast<const Bytef *>(raw.data()), uLong(raw.size()), 6);
  z.resize(size);
  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put32(ihdr, uint32_t(w));
  put32(ihdr, uint32_t(h));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5); // 8-bit RGB
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", "");
  return out;
}

/// Round tick spacing: 1, 2 or 5 times a power of ten, about `n` ticks.
double niceStep(double span, int n) {
  if (!(span > 0))
    return 1;
  double raw = span / n, mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw)
      return m * mag;
  return 10 * mag;
}

std::string formatTick(double v, double step) {
  char buf[32];
  if (step >= 1 && std::fabs(v) < 1e7)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (std::fabs(v) >= 1e-3 || v == 0)
    std::snprintf(buf, sizeof buf, "%.*f",
                  std::min(6, std::max(0, int(-std::floor(std::log10(step))))), v);
  else
    std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

} // namespace

std::string writeLossPlot(const std::string &path,
                          const std::vector<LossPoint> &points,
                          const std::string &title) {
  std::vector<const LossPoint *> finite;
  for (const LossPoint &p : points)
    if (p.loss && std::isfinite(*p.loss))
      finite.push_back(&p);
  if (finite.empty())
    return "no finite loss to plot";
  const int W = 800, H = 480, left = 80, right = 24, top = 44, bottom = 56;
  Canvas c(W, H);
  long long s0 = points.front().step, s1 = points.back().step;
  if (s1 == s0)
    s1 = s0 + 1;
  double lo = *finite.front()->loss, hi = lo;
  for (const LossPoint *p : finite) {
    lo = std::min(lo, *p->loss);
    hi = std::max(hi, *p->loss);
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    lo -= 0.5 * std::max(std::fabs(lo), 1e-3);
    hi += 0.5 * std::max(std::fabs(hi), 1e-3);
  }
  double ystep = niceStep(hi - lo, 5);
  double y0 = std::floor(lo / ystep) * ystep, y1 = std::ceil(hi / ystep) * ystep;
  double xstep = std::max(1.0, niceStep(double(s1 - s0), 8));
  int plotW = W - left - right, plotH = H - top - bottom;
  auto X = [&](double s) {
    return left + int(std::lround((s - s0) / double(s1 - s0) * plotW));
  };
  auto Y = [&](double v) {
    return top + plotH - int(std::lround((v - y0) / (y1 - y0) * plotH));
  };

  for (double v = y0; v <= y1 + ystep / 2; v += ystep) {
    int y = Y(v);
    c.hline(left, left + plotW, y, kGrid);
    std::string t = formatTick(v, ystep);
    c.text(left - 8 - c.textWidth(t), y - 3, t, kBlack);
  }
  for (double s = std::ceil(s0 / xstep) * xstep; s <= s1; s += xstep) {
    int x = X(s);
    c.vline(x, top, top + plotH, kGrid);
    std::string t = formatTick(s, xstep);
    c.text(x - c.textWidth(t) / 2, top + plotH + 8, t, kBlack);
  }
  c.hline(left, left + plotW, top + plotH, kBlack);
  c.vline(left, top, top + plotH, kBlack);
  c.text(left + plotW / 2 - c.textWidth("step") / 2, H - 22, "step", kBlack);
  c.text(8, top - 18, "loss", kBlack);
  c.text(left + plotW / 2 - c.textWidth(title, 2) / 2, 10, title, kBlack, 2);

  // The curve; a step without a finite loss breaks it and gets a red tick.
  const LossPoint *prev = nullptr;
  for (const LossPoint &p : points) {
    if (!p.loss || !std::isfinite(*p.loss)) {
      c.vline(X(double(p.step)), top + plotH - 6, top + plotH, kGap);
      prev = nullptr;
      continue;
    }
    if (prev)
      c.line(X(double(prev->step)), Y(*prev->loss), X(double(p.step)), Y(*p.loss),
             kCurve);
    else
      c.line(X(double(p.step)), Y(*p.loss), X(double(p.step)), Y(*p.loss), kCurve);
    prev = &p;
  }

  std::ofstream f(path, std::ios::binary);
  std::string bytes = c.png();
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f)
    return "cannot write " + path;
  return "";
}

std::string readLossLog(const std::string &path, std::vector<LossPoint> &points) {
  std::ifstream f(path);
  if (!f)
    return "cannot read " + path;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    llvm::Expected<llvm::json::Value> v = llvm::json::parse(line);
    if (!v) {
      llvm::consumeError(v.takeError());
      return path + ":" + std::to_string(n) + ": not a JSON line";
    }
    const llvm::json::Object *o = v->getAsObject();
    std::optional<int64_t> step = o ? o->getInteger("step") : std::nullopt;
    if (!step)
      return path + ":" + std::to_string(n) + ": no \"step\"";
    LossPoint p{*step, std::nullopt};
    if (std::optional<double> loss = o->getNumber("loss"))
      p.loss = *loss;
    points.push_back(p);
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const LossPoint &a, const LossPoint &b) { return a.step < b.step; });
  return "";
}

} // namespace pipec
