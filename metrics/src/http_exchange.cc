#include "http_exchange.h"

#include <algorithm>
#include <cctype>

namespace tensorcom::metrics::http {
namespace {

[[nodiscard]] bool same_letters(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

[[nodiscard]] std::string_view trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

// The head's lines after the request line, "\r" stripped, to the blank one.
template <typename Visit>
void for_each_header(std::string_view head, Visit visit) {
  std::size_t start = head.find('\n');
  while (start != std::string_view::npos && start + 1 < head.size()) {
    const std::size_t end = head.find('\n', start + 1);
    const std::string_view line = trim(head.substr(start + 1, end == std::string_view::npos ? end : end - start - 1));
    if (line.empty()) return;
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos) visit(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
    start = end;
  }
}

// A body is announced by a Content-Length other than 0 or by any
// Transfer-Encoding (RFC 9112, 6.3).
[[nodiscard]] bool announces_body(std::string_view head) {
  bool body = false;
  for_each_header(head, [&](std::string_view name, std::string_view value) {
    if (same_letters(name, "transfer-encoding")) body = true;
    if (same_letters(name, "content-length") && value.find_first_not_of('0') != std::string_view::npos) body = true;
  });
  return body;
}

}  // namespace

std::size_t head_length(std::string_view received) {
  const std::size_t crlf = received.find("\r\n\r\n");
  const std::size_t lf = received.find("\n\n");
  if (crlf == std::string_view::npos && lf == std::string_view::npos) return 0;
  return std::min(crlf == std::string_view::npos ? received.size() : crlf + 4,
                  lf == std::string_view::npos ? received.size() : lf + 2);
}

Ask classify(std::string_view head) {
  const std::string_view line = trim(head.substr(0, head.find('\n')));
  const std::size_t first = line.find(' ');
  const std::size_t second = first == std::string_view::npos ? first : line.find(' ', first + 1);
  if (second == std::string_view::npos || line.find(' ', second + 1) != std::string_view::npos) {
    return Ask::kBadRequest;
  }
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, second - first - 1);
  if (line.substr(second + 1).rfind("HTTP/1.", 0) != 0) return Ask::kBadRequest;
  if (method != "GET") return Ask::kBadMethod;
  if (announces_body(head)) return Ask::kHasBody;
  return target.substr(0, target.find('?')) == "/metrics" ? Ask::kMetrics : Ask::kNotFound;
}

std::string response(int status, std::string_view reason, std::string_view content_type, std::string_view body) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
  out.append(reason).append("\r\nContent-Type: ").append(content_type);
  out += "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
  if (status == 405) out += "Allow: GET\r\n";
  out.append("\r\n").append(body);
  return out;
}

std::string refusal(Ask ask) {
  constexpr std::string_view kText = "text/plain; charset=utf-8";
  switch (ask) {
    case Ask::kNotFound: return response(404, "Not Found", kText, "only /metrics is served here\n");
    case Ask::kBadMethod: return response(405, "Method Not Allowed", kText, "only GET is served here\n");
    case Ask::kHasBody: return response(413, "Content Too Large", kText, "a request body is not accepted\n");
    case Ask::kMetrics:
    case Ask::kBadRequest: break;
  }
  return response(400, "Bad Request", kText, "not an HTTP/1.x request\n");
}

std::string too_large() {
  return response(431, "Request Header Fields Too Large", "text/plain; charset=utf-8",
                  "the request's line and headers are over the endpoint's limit\n");
}

}  // namespace tensorcom::metrics::http
