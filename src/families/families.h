// The kernel families built into convtune: one folder under src/families each, whose sources define
// families::make_<folder>(). The build generates family_list.h from the folders (src/CMakeLists.txt), so the list
// cannot miss a family, and a folder without its make function fails the link.
#pragma once

#include "family_list.h"  // generated: the make_<folder>() declarations and make_all()
