// A reader of the plain data that Python's pickle writes (protocols 2 to 5), for the flight
// recorder's dumps: dict, list, tuple, str, bytes, int (to 64 bits), float, bool, None and the memo.
// Whatever would build an object (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, ...) is
// refused by name, so a file can never make the reader run code or allocate without bound.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace sdc::goodput {

// The pickle's value as JSON: a tuple is an array, bytes are a string, every string must be UTF-8,
// a dict's keys must be str (an int key becomes its decimal text). Throws InputError "byte N: ..." (the caller adds the
// file).
nlohmann::json read_pickle(std::string_view data);

}  // namespace sdc::goodput
