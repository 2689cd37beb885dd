// Human-readable quantities for messages and tables (never for plan JSON, which keeps raw
// numbers).
#pragma once

#include <cstdint>
#include <string>

namespace pulse {

/// "1.50 GiB", "320.0 MiB", "12.0 KiB", "512 B".
std::string format_bytes(std::int64_t bytes);
/// "1.234 s", "12.3 ms", "45.6 us".
std::string format_seconds(double seconds);

}  // namespace pulse
