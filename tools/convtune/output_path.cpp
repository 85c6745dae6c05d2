// Output location checks (see output_path.h).
#include "tools/convtune/output_path.h"

#include "src/core/atomic_file.h"

namespace convtune::cli {

void prepare_output(const std::filesystem::path& path, bool is_default, const std::string& option,
                    uint64_t expected_bytes, bool remove_stale) {
  if (is_default && path.has_parent_path()) ensure_directory(path.parent_path());
  check_writable(path, option, expected_bytes);
  // Temporaries PATH.tmp.PID.N of earlier runs killed mid-write would otherwise stay forever (only those of
  // processes that no longer exist go).
  if (remove_stale) remove_stale_temporaries(path);
}

uint64_t database_write_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return (ec ? 0 : static_cast<uint64_t>(size)) + (uint64_t{1} << 20);
}

}  // namespace convtune::cli
