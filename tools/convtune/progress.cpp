// Progress bar drawing and ETA.
#include "tools/convtune/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "convtune/error.h"

namespace convtune::cli {

std::string format_duration(double seconds) {
  if (seconds < 1) return fmt::format("{:.0f}ms", seconds * 1e3);
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const int whole = static_cast<int>(std::lround(seconds));
  if (whole < 3600) return fmt::format("{}m{:02d}s", whole / 60, whole % 60);
  return fmt::format("{}h{:02d}m", whole / 3600, whole % 3600 / 60);
}

size_t terminal_columns(int fd) {
  if (const char* forced = std::getenv("CONVTUNE_COLUMNS"); forced && *forced) {
    char* end = nullptr;
    const long columns = std::strtol(forced, &end, 10);
    if (*end == '\0' && columns > 0) return static_cast<size_t>(columns);
  }
  if (!isatty(fd)) return 0;
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;  // a terminal that does not say: the narrowest common one
}

std::string fit_width(const std::string& text, size_t width) {
  if (width == 0 || text.size() <= width) return text;
  if (width <= 3) return text.substr(0, width);
  return text.substr(0, width - 3) + "...";
}

std::string format_progress_line(const std::string& label, double fraction, const std::string& status,
                                  const std::string& timing, size_t width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  auto bar = [&](int cells) {
    const int filled = static_cast<int>(fraction * cells);
    return "[" + std::string(filled, '#') + std::string(cells - filled, '-') + "]";
  };
  const std::string percent = fmt::format("{:3.0f}%", fraction * 100);
  const std::string tail = timing.empty() ? "" : " " + timing;
  std::string line = fmt::format("{} {} {}{}{}", label, bar(20), percent, status.empty() ? "" : " " + status, tail);
  if (width == 0 || line.size() <= width) return line;
  // Without the status, in the room left (a cut status shorter than 8 characters says nothing).
  const std::string fixed = fmt::format("{} {} {}", label, bar(20), percent);
  if (fixed.size() + tail.size() + 9 <= width) {
    return fixed + " " + fit_width(status, width - fixed.size() - tail.size() - 1) + tail;
  }
  const std::string narrow = fmt::format("{} {} {}{}", label, bar(5), percent, tail);
  if (narrow.size() <= width) return narrow;
  return fit_width(narrow, width);
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
  std::string timing;
  if (final) timing = fmt::format("in {}", format_duration(elapsed));
  else if (done > 0) timing = fmt::format("ETA {}", format_duration(elapsed * (1 - fraction) / fraction));
  // One column spare: a line that fills the last column makes some terminals wrap before the \r.
  const size_t columns = terminal_columns(STDERR_FILENO);
  // Written with fprintf (its own \r and erase-line), past the filter std::cerr has: the label and status (layer
  // names from a suite file) made printable here.
  const std::string line =
      format_progress_line(printable(label_), fraction, printable(status), timing, columns ? columns - 1 : 0);
  if (tty_) std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace convtune::cli
