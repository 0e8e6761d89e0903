#pragma once

// The number of fields of an aggregate struct, counted by the compiler: the most initializers
// `T{...}` takes when each converts to anything. A list of a struct's fields written by hand
// (model/messages/report_sum.hpp) is checked against it, so that a field added to the struct
// and not to the list fails to compile.

#include <cstddef>
#include <type_traits>
#include <utility>

namespace kvtier {

namespace field_count_detail {

struct any_field {
  template <class T>
  constexpr operator T() const;  // never defined: only asked whether it would convert
};

template <size_t>
using any_for = any_field;

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
template <class T, class... A>
constexpr auto brace_initializable(int) -> decltype(T{std::declval<A>()...}, true) {
  return true;
}
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

template <class T, class... A>
constexpr bool brace_initializable(...) {
  return false;
}

template <class T, size_t... I>
constexpr bool takes(std::index_sequence<I...>) {
  return brace_initializable<T, any_for<I>...>(0);
}

template <class T, size_t N>
constexpr size_t count_from() {
  if constexpr (takes<T>(std::make_index_sequence<N + 1>{}))
    return count_from<T, N + 1>();
  else
    return N;
}

}  // namespace field_count_detail

/// How many fields the aggregate `T` has (each declarator of a `a = 0, b = 0;` line counts).
template <class T>
constexpr size_t field_count() {
  static_assert(std::is_aggregate_v<T>, "field_count counts the fields of aggregates only");
  return field_count_detail::count_from<T, 0>();
}

}  // namespace kvtier
