// Fuzz harness: tuning logs (convtune tune --log FILE.json) through TuneLog::parse and everything `convtune
// report` builds from one (histograms, heatmaps, tables). Properties: only InvalidArgument escapes; the charts
// are built without undefined behaviour or unbounded memory.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "convtune/error.h"
#include "tools/convtune/report.h"
#include "tools/convtune/tune_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace convtune;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const cli::TuneLog log = cli::TuneLog::parse(text, "fuzz.json");
    const cli::Report report = cli::build_report(log, {}, 0);
    std::ostringstream out;
    report.table.print(out);
    (void)report.table.markdown();
    (void)report.table.json().dump();
  } catch (const InvalidArgument&) {
  }
  return 0;
}
