// libFuzzer target: reading .ten files (recordings come from other machines
// and from crashes): TenListReader, read_ten_lists, read_ten and salvage_ten.
// The last input byte chooses the limits and the list length, the rest is the
// file (so that .ten seeds work as they are: their last byte is padding).
// Reading must give lists or a FormatError; salvage never throws one, keeps
// only whole lists inside the file, and agrees with the reader on an intact
// file.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "test_support.h"
#include "memory_file.h"
#include "tensorcom/codec/ten_file.h"

using namespace tensorcom;
using tensorcom::fuzz::MemoryFile;
using tensorcom::testing::same_lists;

namespace {

std::size_t touch(const TensorList& list) {
  std::size_t sum = 0;
  for (const Tensor& t : list) {
    for (std::byte b : t.bytes()) sum += static_cast<std::size_t>(b);
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t control = data[size - 1];
  MemoryFile file(data, size - 1);
  DecodeLimits limits;
  limits.max_ndim = 8;
  // Small limits reach the streaming past the inferred length, and its errors.
  if (control & 0x80) limits.max_tensors = 1 + (control & 7);
  const std::size_t group = (control >> 3) & 3;  // 0: infer
  std::size_t sum = 0;

  std::optional<std::vector<TensorList>> lists;
  try {
    lists = read_ten_lists(file.path(), group, limits);
    for (const TensorList& list : *lists) {
      if (list.empty() || list.size() > limits.max_tensors) __builtin_trap();
      sum += touch(list);
    }
  } catch (const FormatError&) {
  } catch (const ArgumentError&) {
    if (group <= limits.max_tensors) __builtin_trap();  // only a given length over the limit
  }

  try {
    TensorList flat = read_ten(file.path(), limits);
    if (lists) {
      std::size_t tensors = 0;
      for (const TensorList& list : *lists) tensors += list.size();
      if (tensors != flat.size()) __builtin_trap();
    }
  } catch (const FormatError&) {
    if (lists) __builtin_trap();  // the lists read, so the tensors do
  }

  std::vector<TensorList> salvaged;
  SalvageReport report;
  try {
    report = salvage_ten(
        file.path(), group, [&](TensorList&& list) { salvaged.push_back(std::move(list)); }, limits);
  } catch (const ArgumentError&) {
    return static_cast<int>(sum & 0);
  }
  if (report.whole_bytes > report.file_bytes || report.file_bytes != size - 1) __builtin_trap();
  if (report.lists != salvaged.size() || report.tensors != report.lists * report.list_length) __builtin_trap();
  for (const TensorList& list : salvaged) {
    if (list.size() != report.list_length) __builtin_trap();
    sum += touch(list);
  }
  if (report.intact() && (!lists || !same_lists(*lists, salvaged))) __builtin_trap();
  return static_cast<int>(sum & 0);
}
