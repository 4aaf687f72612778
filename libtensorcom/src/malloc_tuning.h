// Internal: the process-wide malloc options a receiving Connection sets
// (connection.h states it in Connection's contract).
#pragma once

namespace tensorcom::detail {

// Makes large message buffers stay mapped between messages: glibc serves
// them from one never-trimmed heap. Process-wide; the first call does it,
// later calls do nothing. Thread safe.
void keep_large_buffers_mapped();

}  // namespace tensorcom::detail
