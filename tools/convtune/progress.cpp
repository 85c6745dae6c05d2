// Progress bar drawing and ETA.
#include "tools/convtune/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace convtune::cli {

std::string format_duration(double seconds) {
  if (seconds < 1) return fmt::format("{:.0f}ms", seconds * 1e3);
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const int whole = static_cast<int>(std::lround(seconds));
  if (whole < 3600) return fmt::format("{}m{:02d}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02d}m", whole / 3600, whole % 3600 / 60);
}

Progress::Progress(std::string label, int64_t total)
    : label_(std::move(label)), total_(std::max<int64_t>(total, 1)), tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t done, const std::string& status) { draw(done, status, false); }

void Progress::finish(const std::string& status) { draw(total_, status, true); }

void Progress::draw(int64_t done, const std::string& status, bool final) {
  done = std::clamp<int64_t>(done, 0, total_);
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const int decile = static_cast<int>(fraction * 10);
  if (!final) {
    if (tty_ && now - last_draw_ < std::chrono::milliseconds(100)) return;  // redrawing faster only flickers
    if (!tty_ && decile <= last_decile_) return;
  }
  last_draw_ = now, last_decile_ = decile;
  constexpr int width = 20;
  const int filled = static_cast<int>(fraction * width);
  const std::string bar = std::string(filled, '#') + std::string(width - filled, '-');
  std::string timing;
  if (final) timing = fmt::format("in {}", format_duration(elapsed));
  else if (done > 0) timing = fmt::format("ETA {}", format_duration(elapsed * (1 - fraction) / fraction));
  const std::string line = fmt::format("{} [{}] {:3.0f}% {} {}", label_, bar, fraction * 100, status, timing);
  if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace convtune::cli
