// Where an image server's lines go: progress (rate lines, epoch notes, the
// summary) and warnings (skipped samples, shard errors), each prefixed with
// the program's name. The programs write them to stdout and stderr; unit
// tests collect them. The pipeline writes nowhere else.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tensorcom::pipeline {

class ServerLog {
 public:
  // Receives one whole line, without its newline. Called from any of the
  // server's threads: a sink must be thread-safe.
  using Sink = std::function<void(std::string_view line)>;

  // program: the prefix of every line ("serve-imagenet-shards"). An empty
  // sink is its standard stream: progress to stdout, warnings to stderr, a
  // whole line at a time.
  explicit ServerLog(std::string program, Sink info = {}, Sink warning = {});

  // Writes "PROGRAM: text" to the progress sink.
  void info(std::string_view text) const;
  // Writes "PROGRAM: text" to the warning sink.
  void warn(std::string_view text) const;
  [[nodiscard]] const std::string& program() const noexcept { return program_; }

 private:
  std::string program_;
  Sink info_;
  Sink warning_;
};

}  // namespace tensorcom::pipeline
