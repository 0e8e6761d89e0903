#pragma once

// A config key as the code names it, and its row in the options table. Keys are typed constants
// (runtime/config/*_keys.hpp): the config reads a key only through the accessor of the key's
// type, so a misspelled key or a text key read as a number fails to compile, and a table row
// takes its type from its key, so the two cannot disagree.

#include <utility>
#include <vector>

namespace kvtier {

enum class option_type { integer, number, text, boolean, list, text_list };

/// A key's dotted name ("cache.block_size"), whatever its type: for is_set and for messages.
struct key_name {
  const char* name;
  constexpr explicit key_name(const char* n) : name(n) {}
};

/// A key whose values are of type `T`.
template <option_type T>
struct config_key : key_name {
  static constexpr option_type type = T;
  constexpr explicit config_key(const char* n) : key_name(n) {}
};

using integer_key = config_key<option_type::integer>;
using number_key = config_key<option_type::number>;
using text_key = config_key<option_type::text>;
using boolean_key = config_key<option_type::boolean>;
using list_key = config_key<option_type::list>;
using text_list_key = config_key<option_type::text_list>;

/// The bound of the keys that count blocks: block ids are 32-bit.
inline constexpr double max_block_count = 4294967295.0;

struct option_spec {
  template <option_type T>
  option_spec(config_key<T> k, double lo, double hi, std::vector<const char*> allowed,
              bool may_be_null, const char* meaning)
      : key(k.name), type(T), min(lo), max(hi), choices(std::move(allowed)),
        optional(may_be_null), help(meaning) {}

  const char* key;
  option_type type;
  double min;  ///< for integer and number
  double max;
  std::vector<const char*> choices;  ///< for text: the allowed values (empty: any text)
  bool optional;  ///< may be null (unset), e.g. one of a tokens/blocks pair
  const char* help;
};

}  // namespace kvtier
