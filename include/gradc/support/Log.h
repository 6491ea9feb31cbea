//===- Log.h - what the passes decided, for `-v` / `--log-level` ----------===//
//
// Passes log their decisions (fusion groups, remat choices, the arena plan,
// the schedule of each kernel, threads) so that a user can see why the code
// looks as it does. Off by default; printed to stderr as `[pass] message`.
// Build the message only when `log_enabled(level)`: logging costs nothing off.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>

namespace gradc {

enum class LogLevel { Off, Info, Debug };

void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
/// `off`, `info` or `debug`.
std::optional<LogLevel> parse_log_level(const std::string &name);
void log(LogLevel level, const char *pass, const std::string &message);

} // namespace gradc
