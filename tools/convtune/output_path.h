// Output files of the commands (--out, --db, --log, --markdown), checked before the long work that fills them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace convtune::cli {

// Before work starts: for one of convtune's default locations (`is_default`: the tuning database under
// ~/.local/share/convtune, its logs folder) creates the folder; for a path the user gave, requires that its folder
// exists. Then checks that a file can be created there and that about `expected_bytes` are free, and removes
// temporaries PATH.tmp.PID.N of killed writers (`remove_stale`; false for files whose writers clean up under a
// lock: the tuning database). Throws InvalidArgument naming `option` and the path.
void prepare_output(const std::filesystem::path& path, bool is_default, const std::string& option,
                    uint64_t expected_bytes = 64 << 10, bool remove_stale = true);

// What saving the tuning database at `path` writes: its present size plus room for the new entries.
uint64_t database_write_bytes(const std::filesystem::path& path);

}  // namespace convtune::cli
