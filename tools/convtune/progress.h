// Progress: a one-line progress bar with ETA on stderr for long commands (tune, train).
#pragma once

#include <chrono>
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

}  // namespace convtune::cli
