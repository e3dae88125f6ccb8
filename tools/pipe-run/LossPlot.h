//===- LossPlot.h - pipe-run --plot: the loss curve as a PNG -----*- C++ -*-===//
//
// A line chart of the training loss per step (evaluations' losses as
// squares, their accuracies on a second axis), drawn into an RGB raster with
// a built-in 5x7 pixel font (axis ticks, labels) and written as a PNG
// (zlib's deflate and CRC). No plotting library: pipe-run stays a plain
// C++ tool.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TOOLS_PIPE_RUN_LOSSPLOT_H
#define PIPEC_TOOLS_PIPE_RUN_LOSSPLOT_H

#include <optional>
#include <string>
#include <vector>

namespace pipec {

struct LossPoint {
  long long step;
  /// Absent where the step's loss was not finite (or not reported).
  std::optional<double> loss;
  /// An evaluation's loss after this step (pipe-run --eval-data), drawn as
  /// a marker, not part of the training curve.
  bool eval = false;
  /// An evaluation's accuracy in [0, 1] ("eval_accuracy"), where the plan
  /// counts one: drawn against a right-hand axis of 0-100%.
  std::optional<double> accuracy;
};

/// Draws `points` (in step order) and writes the PNG to `path`. Returns an
/// error message, empty on success.
std::string writeLossPlot(const std::string &path,
                          const std::vector<LossPoint> &points,
                          const std::string &title);

/// Reads the steps of a pipe-run --log file (one JSON object per line:
/// "step", "loss"; an evaluation's "step", "eval_loss", "eval_accuracy").
/// Returns an error
/// message, empty on success.
std::string readLossLog(const std::string &path, std::vector<LossPoint> &points);

} // namespace pipec

#endif // PIPEC_TOOLS_PIPE_RUN_LOSSPLOT_H
