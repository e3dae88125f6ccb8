#!/usr/bin/env python3
"""Checks a `pipe-run --plot` PNG against the run's log.

    check_loss_png.py PLOT.png STEPS.jsonl

Decodes the PNG (8-bit RGB, zlib, per-row filters) with the standard
library, finds the curve's pixels (its blue) and the red ticks of steps
without a finite loss, and checks that the drawing follows the log: the
curve spans the plot's width, its height at the first and last finite steps
is ordered like those losses, and there is a red tick iff some step has no
finite loss. The log's evaluations (pipe-run --eval-data) are orange
squares: as many 7x7 squares as evaluations (and the legend's); their
accuracies ("eval_accuracy") green squares on a 0-100% axis, each at its
accuracy's height. Prints a line of facts; exits 1 on a mismatch.
"""
import json
import math
import struct
import sys
import zlib

CURVE, GAP, EVAL, ACC = (31, 119, 180), (214, 39, 40), (255, 127, 14), (44, 160, 44)
TOP, BOTTOM, LEFT = 44, 56, 80


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"FAIL: {path} is not a PNG")
    pos, idat, w, h = 8, b"", None, None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]:
            sys.exit(f"FAIL: bad CRC in chunk {kind}")
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            if (depth, color) != (8, 2):
                sys.exit("FAIL: not 8-bit RGB")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = 3 * w
    rows = []
    for y in range(h):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        if line[0] != 0:
            sys.exit("FAIL: expected filter 0 rows")
        rows.append(line[1:])
    return w, h, rows


def main():
    png, log = sys.argv[1], sys.argv[2]
    w, h, rows = decode(png)
    curve, gaps, orange, green = [], 0, set(), set()
    for y, row in enumerate(rows):
        for x in range(w):
            px = tuple(row[3 * x:3 * x + 3])
            if px == CURVE:
                curve.append((x, y))
            elif px == GAP:
                gaps += 1
            elif px == EVAL:
                orange.add((x, y))
            elif px == ACC:
                green.add((x, y))
    lines = [json.loads(l) for l in open(log) if l.strip()]
    steps = [s for s in lines if "eval_loss" not in s]
    evals = [s for s in lines if "eval_loss" in s]
    # Squares: pixels of a colour whose 7x7 neighbourhood is all of it,
    # found by their top-left corner.
    def squares_of(pixels):
        return sorted((x, y) for (x, y) in pixels
                      if all((x + i, y + j) in pixels for i in range(7) for j in range(7))
                      and (x - 1, y) not in pixels and (x, y - 1) not in pixels)
    squares = len(squares_of(orange))
    if squares != len(evals) + (1 if evals else 0):
        sys.exit(f"FAIL: {squares} orange squares, but {len(evals)} evaluations "
                 "(and a legend)")
    accs = [e["eval_accuracy"] for e in evals
            if isinstance(e.get("eval_accuracy"), (int, float))]
    right_margin = 64 if accs else 24
    plot_h = h - TOP - BOTTOM
    marks = [(x, y) for (x, y) in squares_of(green) if y >= TOP - 3]
    if len(marks) != len(accs):
        sys.exit(f"FAIL: {len(marks)} green squares in the plot, but {len(accs)} "
                 "evaluated accuracies")
    # Left to right, each at its accuracy's height (centre = corner + 3).
    for (x, y), a in zip(sorted(marks), accs):
        want_y = TOP + plot_h - round(a * plot_h)
        if abs(y + 3 - want_y) > 1:
            sys.exit(f"FAIL: an accuracy square at y {y + 3}, but {a} is at y {want_y}")
    finite = [s for s in steps if isinstance(s.get("loss"), (int, float)) and math.isfinite(s["loss"])]
    if not curve:
        sys.exit("FAIL: no curve pixels")
    xs = [x for x, _ in curve]
    left, right = min(xs), max(xs)
    # The plot area is 800 - 80 - 24 pixels wide over the logged steps (64
    # on the right with the accuracy axis).
    first, last = steps[0]["step"], steps[-1]["step"]
    want = ((w - LEFT - right_margin) * (finite[-1]["step"] - finite[0]["step"])
            / max(last - first, 1))
    if right - left < 0.9 * want:
        sys.exit(f"FAIL: the curve spans {right - left} of {w} pixels, "
                 f"expected about {want:.0f}")
    # Height (smaller y = higher) at both ends.
    y_first = min(y for x, y in curve if x <= left + 1)
    y_last = min(y for x, y in curve if x >= right - 1)
    if len(finite) > 1 and (finite[0]["loss"] > finite[-1]["loss"]) != (y_first < y_last):
        sys.exit(f"FAIL: the curve's ends (y {y_first}, {y_last}) are not ordered "
                 f"like the losses {finite[0]['loss']}, {finite[-1]['loss']}")
    want_gaps = len(finite) < len(steps)
    if want_gaps != (gaps > 0):
        sys.exit(f"FAIL: {gaps} red pixels, but {len(steps) - len(finite)} steps "
                 f"without a finite loss")
    print(f"OK: {w}x{h} PNG, curve over {right - left} pixels, "
          f"{'falling' if y_first < y_last else 'rising'}, "
          f"non-finite steps marked: {'yes' if gaps else 'none'}"
          + (f", {len(evals)} evaluations" if evals else "")
          + (f", {len(accs)} accuracies" if accs else ""))


if __name__ == "__main__":
    main()
