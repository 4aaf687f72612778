#include "receipt_wire.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace tensorcom::detail {

namespace {

void put_word(std::vector<std::byte>& out, std::uint64_t word) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(word >> (8 * i)));
}

std::uint64_t word_at(std::span<const std::byte> bytes, std::size_t index) {
  std::uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = (word << 8) | std::to_integer<std::uint64_t>(bytes[8 * index + i]);
  return word;
}

bool is_hex_name(std::string_view name) {
  return name.size() == 16 && std::all_of(name.begin(), name.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

std::optional<std::string> tcp_endpoint(std::string_view port_text, std::string_view peer_address) {
  unsigned port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port == 0 || port > 65535) {
    return std::nullopt;
  }
  if (peer_address.empty()) return std::nullopt;
  const bool ipv6 = peer_address.find(':') != std::string_view::npos;
  std::string host = ipv6 ? "[" + std::string(peer_address) + "]" : std::string(peer_address);
  return "tcp://" + host + ":" + std::to_string(port);
}

}  // namespace

std::vector<std::byte> encode_receipt(std::uint64_t run, std::span<const std::uint64_t> sequences) {
  std::vector<std::byte> out;
  out.reserve(8 * (1 + sequences.size()));
  put_word(out, run);
  for (std::uint64_t sequence : sequences) put_word(out, sequence);
  return out;
}

std::optional<Receipt> decode_receipt(std::span<const std::byte> bytes) {
  if (bytes.size() < 16 || bytes.size() > kMaxReceiptBytes || bytes.size() % 8 != 0) return std::nullopt;
  Receipt receipt;
  receipt.run = word_at(bytes, 0);
  for (std::size_t i = 1; i < bytes.size() / 8; ++i) receipt.sequences.push_back(word_at(bytes, i));
  return receipt;
}

std::optional<std::string> receipt_endpoint(std::string_view address, std::string_view peer_address) {
  if (address.starts_with("tcp:")) return tcp_endpoint(address.substr(4), peer_address);
  if (address.starts_with("ipc:")) {
    const std::string_view name = address.substr(4);
    if (!name.starts_with(kReceiptIpcPrefix) || !is_hex_name(name.substr(kReceiptIpcPrefix.size()))) {
      return std::nullopt;
    }
    return "ipc://" + std::string(name);
  }
  return std::nullopt;
}

}  // namespace tensorcom::detail
