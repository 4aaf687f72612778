#include "batch_source.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <algorithm>
#include <iostream>

namespace po = boost::program_options;

namespace tensorcom::tools {

namespace {

// Longest --timeout accepted: a day, so that the milliseconds fit anywhere.
constexpr double kMaxTimeoutSeconds = 86400;

ConnectionOptions connection_options(const SourceOptions& source) {
  ConnectionOptions options;
  options.curve = programs::curve_security(source.curve);
  options.timeout = std::nullopt;    // BatchSource handles silence itself
  options.linger = Milliseconds(0);  // nothing is ever sent: closing need not wait
  options.refuse_duplicate_streams = source.strict;
  return options;
}

std::vector<std::string> urls_or_default(const std::vector<std::string>& urls) {
  programs::refuse_inproc(urls);
  return urls.empty() ? std::vector<std::string>{programs::kDefaultReceiveUrl} : urls;
}

}  // namespace

void add_source_options(po::options_description& options, SourceOptions& source) {
  options.add_options()("timeout,t", po::value(&source.timeout_s)->default_value(source.timeout_s),
                        "seconds without a batch before saying so")(
      "timeout-exit", po::bool_switch(&source.timeout_exit), "exit with status 2 after that silence, not wait on")(
      "strict", po::bool_switch(&source.strict),
      "fail when one stream (--meta) comes from two servers at once, instead of warning");
  programs::add_curve_options(options, source.curve);
}

std::optional<po::variables_map> parse_command_line(int argc, char** argv, const std::string& usage,
                                                    const po::options_description& visible, SourceOptions& source) {
  po::options_description all(visible);
  all.add_options()("url", po::value(&source.urls), "URL patterns");
  po::positional_options_description positional;
  positional.add("url", -1);
  po::variables_map vars;
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vars);
  if (vars.count("help")) {
    std::cout << usage << '\n' << visible;
    return std::nullopt;
  }
  po::notify(vars);
  if (!(source.timeout_s > 0 && source.timeout_s <= kMaxTimeoutSeconds)) {
    throw po::error("--timeout must be a number of seconds in (0, " + format_seconds(kMaxTimeoutSeconds) + "]" +
                    source.timeout_hint);
  }
  return vars;
}

BatchSource::BatchSource(std::string tool, const SourceOptions& options)
    : tool_(std::move(tool)),
      options_(options),
      connection_(urls_or_default(options.urls), connection_options(options)) {
  programs::install_stop_handlers();
}

// Waits in slices: a stop signal that another thread took (the metrics
// endpoint's, say) interrupts no receive, so it is looked for between them.
std::optional<TensorList> BatchSource::next() {
  constexpr Milliseconds kSlice{100};
  const Milliseconds timeout =
      std::max(Milliseconds{1}, std::chrono::round<Milliseconds>(std::chrono::duration<double>(options_.timeout_s)));
  double silent_s = 0;
  Milliseconds waited{0};
  while (!programs::stop_requested()) {
    const Milliseconds slice = std::min(kSlice, timeout - waited);
    std::optional<TensorList> batch;
    try {
      batch = connection_.recv(slice);
    } catch (const TransportError& e) {
      if (e.code() == EINTR && programs::stop_requested()) break;
      throw;
    }
    if (batch) return batch;
    waited += slice;
    if (waited < timeout) continue;
    waited = Milliseconds{0};
    silent_s += options_.timeout_s;
    report_silence(silent_s);
    if (options_.timeout_exit) {
      end_ = SourceEnd::kSilent;
      return std::nullopt;
    }
  }
  end_ = SourceEnd::kInterrupted;
  return std::nullopt;
}

int BatchSource::exit_status() const noexcept {
  switch (end_) {
    case SourceEnd::kSilent: return kExitSilent;
    case SourceEnd::kInterrupted: return programs::kExitInterrupted;
    case SourceEnd::kNotEnded: break;
  }
  return 0;
}

void BatchSource::report_silence(double silent_s) const {
  if (before_message_) before_message_();
  std::cerr << tool_ << ": no batch within " << format_seconds(silent_s) << " s from " << connection_.describe()
            << (options_.timeout_exit ? " (giving up)" : " (still waiting)") << std::endl;
}

std::string format_seconds(double seconds) {
  // Rounded to milliseconds, so that 3 x 0.1 s reads "0.3", not "0.30000000000000004";
  // the shortest text that reads back, so that 2 s reads "2" (JSON would print "2.0").
  char text[32];  // 24 hold any double: to_chars cannot fail
  const std::to_chars_result result = std::to_chars(text, text + sizeof text, std::round(seconds * 1000) / 1000);
  return std::string(text, result.ptr);
}

}  // namespace tensorcom::tools
