#include <string>

#include "tensorcom/programs/program.h"
#include "tensorcom/transport/url.h"

namespace tensorcom::programs {

void refuse_inproc(std::span<const std::string> urls, bool expand_braces) {
  for (const Endpoint& endpoint : parse_urls(urls, expand_braces)) {
    if (endpoint.address.starts_with("inproc://")) {
      throw ArgumentError(endpoint.url +
                          ": inproc:// reaches only threads of this process, and a program has no other end: "
                          "use ipc:// (this machine) or tcp://");
    }
  }
}

}  // namespace tensorcom::programs
