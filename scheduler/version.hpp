#pragma once

namespace sdc {
inline constexpr const char* kVersion = "0.1.0";
}
