#pragma once
namespace ek {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace ek
