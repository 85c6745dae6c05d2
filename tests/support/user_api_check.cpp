// Compiled, never run: the user API (convtune.h and the headers of networks) declares the family-writing API's
// types at most, never defines them, so a program that runs plans does not depend on how families are written.
// The types defined in convtune/extension/ must stay incomplete here.
#include <type_traits>

#include "convtune/convtune.h"
#include "convtune/nn/layers.h"
#include "convtune/nn/model_file.h"
#include "convtune/nn/trainer.h"

namespace {
template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
}  // namespace

static_assert(!is_complete<convtune::KernelFamily>::value,
              "convtune.h must not include convtune/extension/kernel_family.h");
static_assert(!is_complete<convtune::KernelRecipe>::value,
              "convtune.h must not include convtune/extension/kernel_family.h");
// What a plan's user does need is there.
static_assert(is_complete<convtune::Epilogue>::value && is_complete<convtune::FamilySummary>::value);
