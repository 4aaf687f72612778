#include "tensorcom/metrics/metrics.h"

#include <charconv>
#include <cmath>

#include "tensorcom/codec/error.h"

namespace tensorcom::metrics {

namespace {

bool name_start(char c, bool colon_allowed) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':');
}

bool valid_name(std::string_view name, bool colon_allowed) {
  if (name.empty() || !name_start(name[0], colon_allowed)) return false;
  for (char c : name) {
    if (!name_start(c, colon_allowed) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string escape(std::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quotes && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view value) { return escape(value, true); }

std::string escape_help(std::string_view help) { return escape(help, false); }

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  // Shortest text that reads back as the same double.
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void MetricsText::family(std::string_view name, MetricType type, std::string_view help) {
  if (!valid_name(name, true)) throw ArgumentError("metric name '" + escape_label_value(name) + "' is not valid");
  family_ = name;
  text_ += "# HELP " + family_ + " " + escape_help(help) + "\n";
  text_ += "# TYPE " + family_ + (type == MetricType::kCounter ? " counter\n" : " gauge\n");
}

void MetricsText::sample(std::uint64_t value, std::initializer_list<MetricLabel> labels) {
  // Exact: a double would round counts above 2^53.
  sample_line(std::to_string(value), labels);
}

void MetricsText::sample(double value, std::initializer_list<MetricLabel> labels) {
  sample_line(format_metric_value(value), labels);
}

void MetricsText::counter(std::string_view name, std::string_view help, std::uint64_t value) {
  family(name, MetricType::kCounter, help);
  sample(value);
}

void MetricsText::counter(std::string_view name, std::string_view help, double value) {
  family(name, MetricType::kCounter, help);
  sample(value);
}

void MetricsText::gauge(std::string_view name, std::string_view help, double value) {
  family(name, MetricType::kGauge, help);
  sample(value);
}

void MetricsText::sample_line(std::string_view value, std::initializer_list<MetricLabel> labels) {
  if (family_.empty()) throw ArgumentError("metric sample before its family");
  std::string line = family_;
  if (labels.size() > 0) {
    line += '{';
    bool first = true;
    for (const MetricLabel& label : labels) {
      // Names starting "__" are reserved for Prometheus itself.
      if (!valid_name(label.name, false) || label.name.starts_with("__")) {
        throw ArgumentError("metric label name '" + escape_label_value(label.name) + "' is not valid");
      }
      line += (first ? "" : ",") + std::string(label.name) + "=\"" + escape_label_value(label.value) + '"';
      first = false;
    }
    line += '}';
  }
  text_ += line + ' ' + std::string(value) + '\n';
}

}  // namespace tensorcom::metrics
