// Progress: a one-line progress bar with ETA on stderr for long commands (tune, train).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace convtune::cli {

// On a terminal the line is redrawn in place (\r); into a file or pipe a line is printed at every 10% so logs
// stay short. Not thread-safe: one owner updates it.
class Progress {
 public:
  Progress(std::string label, int64_t total);
  // `done` of `total` finished; `status` is shown after the bar ("42 candidates, 1 failed, best 0.41 ms").
  void update(int64_t done, const std::string& status = {});
  // Completes the line with a final status and the elapsed time.
  void finish(const std::string& status = {});

 private:
  void draw(int64_t done, const std::string& status, bool final);

  std::string label_;
  int64_t total_;
  bool tty_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
};

// "1m05s", "12.3s", "850ms".
std::string format_duration(double seconds);

// The width in characters to draw for on `fd`: CONVTUNE_COLUMNS when set (tests, or a terminal that misreports),
// else the terminal's columns when `fd` is one, else 0: no limit (a file or a pipe keeps every character).
size_t terminal_columns(int fd);

// "LABEL [#####---------------]  25% STATUS TIMING" in at most `width` characters (0: no limit). The status is cut
// first (ending in "..."), then the bar narrows, then the label is cut: on an 80-column terminal a redrawn line
// that wrapped would leave a stale copy of itself on every update.
std::string format_progress_line(const std::string& label, double fraction, const std::string& status,
                                 const std::string& timing, size_t width);

// `text` cut to `width` characters (0: no limit), ending in "..." when something was cut.
std::string fit_width(const std::string& text, size_t width);

}  // namespace convtune::cli
