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

ServerLog ServerLog::standard_streams(std::string program) {
  return ServerLog(
      std::move(program), [](std::string_view line) { write_line(std::cout, line); },
      [](std::string_view line) { write_line(std::cerr, line); });
}

void ServerLog::info(std::string_view text) const {
  if (info_) info_(program_ + ": " + std::string(text));
}

void ServerLog::warn(std::string_view text) const {
  if (warning_) warning_(program_ + ": " + std::string(text));
}

}  // namespace tensorcom::pipeline
