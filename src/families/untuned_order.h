// The order in which plans without tuning data try the kernel families: one list (untuned_order.cpp), read top to
// bottom.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace convtune {

// The list's lines, top to bottom; the names on one line share a rank.
const std::vector<std::vector<std::string_view>>& untuned_order();

// The index of the line that names `family`: plans try lower ranks first, and where only ranks are compared (the
// cost model's leave-one-shape-out check) the families of one line are equals. A name the list lacks ranks after
// every listed family.
int untuned_rank(std::string_view family);

// `family`'s place in the list read top to bottom, left to right: the order of kernel_families(). A name the list
// lacks comes after every listed family.
size_t untuned_position(std::string_view family);

}  // namespace convtune
