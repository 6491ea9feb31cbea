//===- Log.cpp - decision logging through spdlog --------------------------===//
#include "gradc/support/Log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>

namespace gradc {
namespace {

std::atomic<LogLevel> g_level{LogLevel::Off};

spdlog::logger &logger() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto made = std::make_shared<spdlog::logger>("gradc", sink);
    made->set_pattern("%v");
    made->set_level(spdlog::level::trace);
    return made;
  }();
  return *l;
}

} // namespace

void set_log_level(LogLevel level) { g_level = level; }

bool log_enabled(LogLevel level) { return level != LogLevel::Off && level <= g_level.load(); }

std::optional<LogLevel> parse_log_level(const std::string &name) {
  if (name == "off")
    return LogLevel::Off;
  if (name == "info")
    return LogLevel::Info;
  if (name == "debug")
    return LogLevel::Debug;
  return std::nullopt;
}

void log(LogLevel level, const char *pass, const std::string &message) {
  if (log_enabled(level))
    logger().info("[{}] {}", pass, message);
}

} // namespace gradc
