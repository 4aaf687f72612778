// Internal: the process-wide malloc options a receiving Connection sets
// (connection.h states it in Connection's contract).
#pragma once

namespace tensorcom::detail {

// Makes large message buffers stay mapped between messages: glibc serves
// them from one never-trimmed heap. Process-wide; the first call does it,
// later calls do nothing. Thread safe.
void keep_large_buffers_mapped();

// Gives the heap's free memory back to the system (malloc_trim): what the
// setting above keeps for the next message, once it is not needed. Costs a
// walk over the heap's free blocks: call it rarely (a large message dropped,
// a receiver idle, a Connection closed). Thread safe.
void return_free_memory();

}  // namespace tensorcom::detail
