// What the receiving tools (tensormon, tensorshow, tensorstat) share: the
// URL and timeout options, and a source of batches that tells the user when
// the servers are silent instead of hanging without a word.
#pragma once

#include <boost/program_options.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorcom/transport/connection.h"
#include "tensorcom/programs/curve_options.h"
#include "tensorcom/programs/program.h"

namespace tensorcom::tools {

// Exit status for --timeout-exit and no batch within the timeout (the
// frame's kExitInterrupted is the status for a stop signal).
inline constexpr int kExitSilent = 2;

struct SourceOptions {
  std::vector<std::string> urls;  // patterns, brace-expanded by Connection; empty: programs::kDefaultReceiveUrl
  double timeout_s = 10;          // silence, in seconds, before saying so
  bool timeout_exit = false;      // give up after one silence instead of waiting on
  programs::CurveFlags curve;     // CURVE certificates, if any
  bool strict = false;            // refuse one stream from two servers (ConnectionOptions::refuse_duplicate_streams)
  std::string timeout_hint;       // appended to the refusal of a --timeout out of range (empty: none)
};

// Adds --timeout/-t, --timeout-exit, --strict and the CURVE options, bound to source.
void add_source_options(boost::program_options::options_description& options, SourceOptions& source);

// Parses argv: the visible options plus URL patterns as positional arguments.
// On --help prints "usage" and the options to stdout.
// Returns: the notified variables, or nothing when --help was given.
// Throws: boost::program_options::error for bad usage (a timeout that is not
//   a positive number of seconds included).
[[nodiscard]] std::optional<boost::program_options::variables_map> parse_command_line(
    int argc, char** argv, const std::string& usage, const boost::program_options::options_description& visible,
    SourceOptions& source);

// Why a BatchSource stopped giving batches.
enum class SourceEnd {
  kNotEnded,     // next() has not returned nothing yet
  kSilent,       // timeout_exit and a silence
  kInterrupted,  // SIGINT or SIGTERM
};

// Receives batches, saying on stderr "TOOL: no batch within T s from URLS
// (still waiting)" after every timeout of silence. Installs the frame's stop
// handlers (programs::install_stop_handlers): a stop signal makes next()
// return nothing, so tools can report what they have.
class BatchSource {
 public:
  // Connects to the URLs (programs::kDefaultReceiveUrl when none).
  // Throws: UrlError for a bad URL, TransportError if ZeroMQ refuses one.
  BatchSource(std::string tool, const SourceOptions& options);

  // Returns: the next batch; nothing when a signal arrived or, with
  //   timeout_exit, when no batch came within the timeout (end() says which).
  // Throws: TransportError (a URL that cannot receive, such as a zpub).
  [[nodiscard]] std::optional<TensorList> next();

  [[nodiscard]] SourceEnd end() const noexcept { return end_; }
  // Returns: the exit status for end(): 0, kExitSilent or programs::kExitInterrupted.
  [[nodiscard]] int exit_status() const noexcept;

  [[nodiscard]] const Statistics& stats() const noexcept { return connection_.stats(); }
  // The receiving connection, for its counts (malformed messages...).
  [[nodiscard]] const Connection& connection() const noexcept { return connection_; }
  [[nodiscard]] std::string describe() const { return connection_.describe(); }

  // Runs before each silence message, so that a live display can end its
  // line first.
  void set_before_message(std::function<void()> hook) { before_message_ = std::move(hook); }

 private:
  void report_silence(double silent_s) const;

  std::string tool_;
  SourceOptions options_;
  Connection connection_;
  SourceEnd end_ = SourceEnd::kNotEnded;
  std::function<void()> before_message_;
};

// Formats seconds for messages: "10", "0.5", "2.25".
[[nodiscard]] std::string format_seconds(double seconds);

}  // namespace tensorcom::tools
