// Metrics a Prometheus server can scrape: the text exposition format
// (version 0.0.4) written by MetricsText, served over HTTP by MetricsServer
// (metrics_server.h). There is no registry: a program writes its current
// values into a MetricsText when scraped, from counters it already keeps.
//
//   MetricsText out;
//   out.family("tensorcom_server_samples_total", MetricType::kCounter, "Samples sent.");
//   out.sample(samples);
//   out.family("tensorcom_server_skipped_samples_total", MetricType::kCounter, "Samples skipped, by reason.");
//   for (auto& [reason, n] : skips) out.sample(n, {{"reason", reason}});
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tensorcom::metrics {

enum class MetricType {
  kCounter,  // only grows (names end in _total)
  kGauge,    // goes up and down
};

// One label of a sample. Both views must outlive the sample() call only.
struct MetricLabel {
  std::string_view name;   // [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__"
  std::string_view value;  // any UTF-8; escaped when written
};

// Builds one scrape's text. Not thread-safe; cheap to make per scrape.
class MetricsText {
 public:
  // Starts a family: its "# HELP" and "# TYPE" lines. Later samples belong
  // to it. Throws ArgumentError for a name outside [a-zA-Z_:][a-zA-Z0-9_:]*.
  void family(std::string_view name, MetricType type, std::string_view help);
  // One sample of the current family, named as the family.
  // Throws ArgumentError before any family(), or for a bad label name.
  void sample(std::uint64_t value, std::initializer_list<MetricLabel> labels = {});
  void sample(double value, std::initializer_list<MetricLabel> labels = {});
  // family() and one sample without labels.
  void counter(std::string_view name, std::string_view help, std::uint64_t value);
  void counter(std::string_view name, std::string_view help, double value);
  void gauge(std::string_view name, std::string_view help, double value);

  [[nodiscard]] const std::string& text() const noexcept { return text_; }

 private:
  void sample_line(std::string_view value, std::initializer_list<MetricLabel> labels);

  std::string text_;
  std::string family_;  // the current family's name
};

// The Content-Type of the text format.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped for the text format: backslash, double quote and
// line feed become \\, \" and \n.
[[nodiscard]] std::string escape_label_value(std::string_view value);
// HELP text escaped: backslash and line feed (quotes stay).
[[nodiscard]] std::string escape_help(std::string_view help);
// A value as the format spells it: shortest round-trip decimal, "+Inf",
// "-Inf", "NaN".
[[nodiscard]] std::string format_metric_value(double value);

}  // namespace tensorcom::metrics
