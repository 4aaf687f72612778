// What metrics_server.h offers beside the server itself: reading
// --metrics HOST:PORT, and holding a finished program up for its last scrape.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "tensorcom/codec/error.h"
#include "tensorcom/metrics/metrics_server.h"

namespace tensorcom::metrics {

HostPort parse_host_port(const std::string& address) {
  const auto refuse = [&](const char* why) {
    return ArgumentError("metrics address '" + escape_label_value(address) + "': " + why + " (expected HOST:PORT)");
  };
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) throw refuse("no port");
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw refuse("no host");
  const std::string port_text = address.substr(colon + 1);
  unsigned port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc{} || end != port_text.data() + port_text.size() || port > 65535) {
    throw refuse("the port is not a number from 0 to 65535");
  }
  return {std::move(host), static_cast<std::uint16_t>(port)};
}

void hold_for_scrapes(double seconds, const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(seconds, 0.0)));
  while (Clock::now() < until && !(stop && stop())) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace tensorcom::metrics
