// Where convtune's data lives (shipped tuning databases, layer suites): share/convtune beside the library, found
// from the library's own location at run time, so an installed or moved tree finds its data and nothing depends
// on the paths of the machine that built it.
#pragma once

#include <filesystem>

namespace convtune {

// $CONVTUNE_DATA_DIR, else <directory of libconvtune>/<CONVTUNE_DATA_FROM_LIB> (share/convtune relative to the
// install's library directory, fixed at configure time) or <directory of libconvtune>/../share/convtune (the build
// tree), whichever exists first; empty when neither does.
std::filesystem::path data_dir();

}  // namespace convtune
