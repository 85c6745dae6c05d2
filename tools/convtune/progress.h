// Progress: a one-line progress bar on stderr for long CLI loops (training epochs, evaluation batches).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace convtune::cli {

// On a terminal the bar redraws in place with '\r'; when stderr is a file or a pipe (CI logs, scripts) it prints
// a plain line at every ~10% instead, so logs stay short and readable.
class Progress {
 public:
  Progress(std::string label, int64_t total);
  // `done` of `total` steps finished; `status` is shown after the bar ("loss 0.412").
  void update(int64_t done, std::string status = {});
  // Completes the bar and ends its line; later updates are ignored.
  void finish(std::string status = {});

 private:
  void draw(int64_t done, const std::string& status, bool final_line);

  std::string label_;
  int64_t total_ = 0;
  bool tty_ = false;
  bool finished_ = false;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace convtune::cli
