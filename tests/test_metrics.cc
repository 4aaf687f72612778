// The Prometheus text exposition writer (tensorcom/metrics/metrics.h), the
// --metrics address parser, and the sending and receiving sides' families.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tensorcom/codec/error.h"
#include "tensorcom/metrics/metrics.h"
#include "tensorcom/metrics/metrics_server.h"
#include "tensorcom/metrics/receiver_metrics.h"
#include "tensorcom/metrics/sender_metrics.h"

using namespace tensorcom;
using namespace tensorcom::metrics;

TEST_CASE("metrics text") {
  MetricsText out;
  SUBCASE("a counter: HELP, TYPE, an exact integer") {
    out.counter("tensorcom_x_total", "Things.", std::uint64_t{18446744073709551615u});
    CHECK(out.text() ==
          "# HELP tensorcom_x_total Things.\n# TYPE tensorcom_x_total counter\n"
          "tensorcom_x_total 18446744073709551615\n");
  }
  SUBCASE("a gauge with a fraction") {
    out.gauge("tensorcom_depth", "Depth.", 2.5);
    CHECK(out.text() == "# HELP tensorcom_depth Depth.\n# TYPE tensorcom_depth gauge\ntensorcom_depth 2.5\n");
  }
  SUBCASE("labelled samples share one family") {
    out.family("tensorcom_skipped_total", MetricType::kCounter, "Skipped.");
    out.sample(std::uint64_t{3}, {{"reason", "undecodable"}});
    out.sample(std::uint64_t{1}, {{"reason", "no label"}, {"shard", "a"}});
    CHECK(out.text() ==
          "# HELP tensorcom_skipped_total Skipped.\n# TYPE tensorcom_skipped_total counter\n"
          "tensorcom_skipped_total{reason=\"undecodable\"} 3\n"
          "tensorcom_skipped_total{reason=\"no label\",shard=\"a\"} 1\n");
  }
  SUBCASE("label values escape backslash, quote and line feed; UTF-8 passes") {
    out.family("m", MetricType::kGauge, "h");
    out.sample(1.0, {{"v", "a\\b\"c\nd\xc3\xa9"}});
    CHECK(out.text().find("m{v=\"a\\\\b\\\"c\\nd\xc3\xa9\"} 1\n") != std::string::npos);
  }
  SUBCASE("HELP escapes backslash and line feed, not quotes") {
    out.family("m", MetricType::kGauge, "say \"x\\y\"\nnext");
    CHECK(out.text().starts_with("# HELP m say \"x\\\\y\"\\nnext\n"));
  }
  SUBCASE("bad names are refused") {
    CHECK_THROWS_AS(out.family("1abc", MetricType::kGauge, "h"), ArgumentError);
    CHECK_THROWS_AS(out.family("a-b", MetricType::kGauge, "h"), ArgumentError);
    CHECK_THROWS_AS(out.family("", MetricType::kGauge, "h"), ArgumentError);
    CHECK_NOTHROW(out.family("ns:sub_total", MetricType::kCounter, "h"));
    CHECK_THROWS_AS(out.sample(1.0, {{"a:b", "x"}}), ArgumentError);
    CHECK_THROWS_AS(out.sample(1.0, {{"__reserved", "x"}}), ArgumentError);
    CHECK_THROWS_AS(out.sample(1.0, {{"", "x"}}), ArgumentError);
  }
  SUBCASE("a sample needs a family") { CHECK_THROWS_AS(out.sample(1.0), ArgumentError); }
}

TEST_CASE("metric values") {
  CHECK(format_metric_value(0) == "0");
  CHECK(format_metric_value(0.1) == "0.1");
  CHECK(format_metric_value(-3) == "-3");
  CHECK(format_metric_value(1e300) == "1e+300");
  CHECK(format_metric_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_metric_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_metric_value(std::nan("")) == "NaN");
  // Round trip: what is written reads back as the same double.
  CHECK(std::stod(format_metric_value(1.0 / 3)) == 1.0 / 3);
}

TEST_CASE("metrics address") {
  CHECK(parse_host_port("127.0.0.1:0").host == "127.0.0.1");
  CHECK(parse_host_port("127.0.0.1:9100").port == 9100);
  CHECK(parse_host_port("[::1]:80").host == "::1");
  CHECK(parse_host_port("0.0.0.0:65535").port == 65535);
  for (const char* bad : {"127.0.0.1", ":9100", "host:", "host:65536", "host:-1", "host:9x", "host: 1"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)parse_host_port(bad), ArgumentError);
  }
}

TEST_CASE("sender metrics") {
  SenderMetrics sent;
  sent.sent(32, 1000);
  sent.sent(8, 250);
  sent.add_send_blocked(std::chrono::milliseconds(1500));
  sent.set_subscribers(2);
  MetricsText out;
  sent.write(out, {{"read", 0.25}});
  const std::string& text = out.text();
  CHECK(text.find("\ntensorcom_server_samples_total 40\n") != std::string::npos);
  CHECK(text.find("\ntensorcom_server_batches_total 2\n") != std::string::npos);
  CHECK(text.find("\ntensorcom_server_sent_bytes_total 1250\n") != std::string::npos);
  CHECK(text.find("\ntensorcom_server_subscribers 2\n") != std::string::npos);
  CHECK(text.find("\ntensorcom_server_stage_seconds_total{stage=\"read\"} 0.25\n") != std::string::npos);
  CHECK(text.find("\ntensorcom_server_stage_seconds_total{stage=\"send_blocked\"} 1.5\n") != std::string::npos);
}

TEST_CASE("receiver metrics before any batch") {
  ReceiverMetrics received;
  MetricsText out;
  received.write(out);
  CHECK(out.text().find("\ntensorcom_receiver_batches_total 0\n") != std::string::npos);
  // Every kind is there from the start, so that rate() has a zero to start from.
  CHECK(out.text().find("tensorcom_receiver_malformed_messages_total{kind=\"odd frame count\"} 0\n") !=
        std::string::npos);
}
