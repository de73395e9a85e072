// Internal: readable names for native frames.
#pragma once

#include <string>

namespace snapdiff::detail {

// "void ns::f<T, U>(int, long) [clone .isra.0]" -> "ns::f<…>": template
// arguments, parameter lists and return types removed.
std::string short_native_name(std::string name);

}  // namespace snapdiff::detail
