#include "tensorcom/error.h"

#include <cstring>

namespace tensorcom {

IoError::IoError(const std::string& what, int code)
    : Error(what + ": " + std::strerror(code)), code_(code) {}

}  // namespace tensorcom
