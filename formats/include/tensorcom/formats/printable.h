// Names read from outside input (tar member names, shard names, file names)
// reach messages and terminals: escaped first, so that a hostile name cannot
// move the cursor, rewrite earlier lines or hide itself.
#pragma once

#include <string>
#include <string_view>

namespace tensorcom::formats {

// Returns text with control characters (bytes below 0x20, and 0x7f) and
// backslashes escaped C-style: "\n", "\t", "\\", "\x1b". Other bytes,
// UTF-8 included, are kept. At most max_bytes of text are kept; a longer
// text ends in "...".
[[nodiscard]] std::string printable(std::string_view text, std::size_t max_bytes = 512);

// Whether text is well-formed UTF-8 (no stray or overlong bytes, no
// surrogates, nothing past U+10FFFF): what JSON, and so classes.json and
// resume tokens, can hold.
[[nodiscard]] bool is_utf8(std::string_view text) noexcept;

// A URL ("scheme://authority/path...") without what may be secret: the
// user and password before the host ("user:pw@") are left out, and a query
// or fragment (signed URLs carry tokens there) becomes "?...".
// "https://u:pw@host/a.tar?sig=x" gives "https://host/a.tar?...".
// Text without "://" is returned unchanged.
[[nodiscard]] std::string redacted_url(std::string_view url);

// The name of a shard that may be told to others (peers receiving --meta)
// and written to logs: the shard itself for a path; for an http(s) URL,
// redacted_url(); for "pipe:COMMAND" (which may hold URLs with credentials)
// only the base name of its last word that names a tar file, without any
// query; "pipe-shard-N" (N: unit) if no word does.
[[nodiscard]] std::string public_shard_name(std::string_view shard, std::size_t unit);

}  // namespace tensorcom::formats
