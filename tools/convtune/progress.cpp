// Progress bar on stderr: in-place redraws on a terminal, a line every ~10% otherwise.
#include "tools/convtune/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace convtune::cli {

namespace {
constexpr int kBarWidth = 30;
}  // namespace

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void Progress::update(int64_t done, std::string status) {
  if (finished_) return;
  done = std::clamp<int64_t>(done, 0, total_);
  if (tty_) {
    // Redrawing more often than ~20 times a second only costs time in tight loops.
    const auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
    last_draw_ = now;
    draw(done, status, false);
    return;
  }
  const int decile = static_cast<int>(done * 10 / total_);
  if (decile > last_decile_ && decile < 10) {
    last_decile_ = decile;
    draw(done, status, true);
  }
}

void Progress::finish(std::string status) {
  if (finished_) return;
  draw(total_, status, true);
  finished_ = true;
}

void Progress::draw(int64_t done, const std::string& status, bool final_line) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int filled = static_cast<int>(done * kBarWidth / total_);
  const std::string bar = std::string(filled, '#') + std::string(kBarWidth - filled, '.');
  const std::string line = fmt::format("{} [{}] {:>3}% {}/{} {:.1f}s{}{}", label_, bar, done * 100 / total_, done,
                                       total_, seconds, status.empty() ? "" : "  ", status);
  if (tty_) {
    // \x1b[K clears what a longer previous line left behind.
    std::fprintf(stderr, "\r%s\x1b[K%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fflush(stderr);
}

}  // namespace convtune::cli
