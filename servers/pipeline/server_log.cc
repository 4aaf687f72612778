#include "server_log.h"

#include <iostream>
#include <mutex>
#include <utility>

namespace tensorcom::pipeline {

namespace {

// Lines from several threads must not interleave; std::endl flushes, so a
// reader of a pipe sees each line as it happens.
void write_line(std::ostream& out, std::string_view line) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  out << line << std::endl;
}

}  // namespace

ServerLog::ServerLog(std::string program, Sink info, Sink warning)
    : program_(std::move(program)), info_(std::move(info)), warning_(std::move(warning)) {}

void ServerLog::info(std::string_view text) const {
  const std::string line = program_ + ": " + std::string(text);
  if (info_) return info_(line);
  write_line(std::cout, line);
}

void ServerLog::warn(std::string_view text) const {
  const std::string line = program_ + ": " + std::string(text);
  if (warning_) return warning_(line);
  write_line(std::cerr, line);
}

}  // namespace tensorcom::pipeline
