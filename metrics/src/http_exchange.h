// The HTTP side of the metrics endpoint, without sockets: where a request's
// head ends, what it asks for, and the bytes of a reply. Only what a scrape
// needs: GET of one path, no body, one request a connection.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tensorcom::metrics::http {

// Returns: the length of the request's head at the start of `received`,
// through the blank line that ends it ("\r\n\r\n", or "\n\n" from lenient
// clients); 0 while the head is not whole.
[[nodiscard]] std::size_t head_length(std::string_view received);

// What a whole head asks for.
enum class Ask {
  kMetrics,     // GET /metrics (any query)
  kNotFound,    // GET of another path
  kBadMethod,   // another method
  kHasBody,     // a body announced: the endpoint reads none
  kBadRequest,  // no request line of three words with an HTTP/1.x version
};
[[nodiscard]] Ask classify(std::string_view head);

// Returns: a whole HTTP/1.1 response that closes its connection, with
// `body` (text) as its content.
[[nodiscard]] std::string response(int status, std::string_view reason, std::string_view content_type,
                                   std::string_view body);

// Returns: the response to a head that asks for anything but the metrics,
// or to one over the size limit (`too_large`).
[[nodiscard]] std::string refusal(Ask ask);
[[nodiscard]] std::string too_large();

}  // namespace tensorcom::metrics::http
