// A ServerLog whose lines the test reads back.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server_log.h"

namespace tensorcom::pipeline::testing {

class CollectedLog {
 public:
  CollectedLog(std::string program = "srv")
      : log_(
            std::move(program), [this](std::string_view line) { add(progress_, line); },
            [this](std::string_view line) { add(warnings_, line); }) {}
  CollectedLog(const CollectedLog&) = delete;
  CollectedLog& operator=(const CollectedLog&) = delete;

  [[nodiscard]] const ServerLog& log() const noexcept { return log_; }
  [[nodiscard]] std::vector<std::string> progress() const { return copy(progress_); }
  [[nodiscard]] std::vector<std::string> warnings() const { return copy(warnings_); }
  // Every warning, one a line.
  [[nodiscard]] std::string warning_text() const {
    std::string text;
    for (const std::string& line : warnings()) text += line + "\n";
    return text;
  }

 private:
  void add(std::vector<std::string>& lines, std::string_view line) {
    std::lock_guard lock(mutex_);
    lines.emplace_back(line);
  }
  std::vector<std::string> copy(const std::vector<std::string>& lines) const {
    std::lock_guard lock(mutex_);
    return lines;
  }

  mutable std::mutex mutex_;
  std::vector<std::string> progress_;
  std::vector<std::string> warnings_;
  ServerLog log_;
};

}  // namespace tensorcom::pipeline::testing
