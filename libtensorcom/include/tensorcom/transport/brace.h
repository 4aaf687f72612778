// Bash-style brace expansion, used to write many URLs or shard names as one
// pattern: "zsub://h{1,2}:788{0..3}" names eight endpoints. The results match
// bash and Python's braceexpand package, so patterns written for the Python
// tensorcom keep their meaning.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorcom/codec/error.h"

namespace tensorcom {

// The most strings one call may produce; a pattern that expands to more is
// almost certainly a typo (a range missing a digit), not a request.
inline constexpr std::size_t kMaxBraceExpansions = 1'000'000;
// Groups nested deeper than this ("{a,{b,{c,...}}}") are refused: the
// expansion recurses once a level, and no real pattern nests past a few.
inline constexpr std::size_t kMaxBraceDepth = 64;
// Longer patterns are refused: finding the groups of a hostile pattern
// (thousands of braces that never close) costs time quadratic in its length.
inline constexpr std::size_t kMaxBracePatternBytes = 32 << 10;

// Expands the brace groups of `pattern`, left to right:
//   {a,b,c}      comma list; empty items allowed: "x{,y}" -> x xy
//   {0..3}       integer range, ascending or descending, negative numbers allowed
//   {0..10..3}   range with an increment (its sign is ignored): 0 3 6 9
//   {000..099}   zero-padded when either end has a leading zero, to the
//                width of the wider end
//   {a..e}       character range
//   nesting      "{a,{b,c}d}" -> a bd cd
//   products     "a{1,2}b{x,y}" -> a1bx a1by a2bx a2by
// A group with neither a comma nor a valid range ("{a}", "{}", "{1..a}"),
// and an unbalanced brace, stay literal exactly as in bash. A backslash keeps
// the next character literal (`\{`, `\}`, `\,`, `\\`) and is removed from the
// results. Quotes and `$` are ordinary characters (this is not a shell).
// Returns: the expansions in bash's order; at least one string. A pattern
//   without braces or backslashes returns itself.
// Throws: ArgumentError naming `pattern` if it expands to more than
//   kMaxBraceExpansions strings (checked before they are built), nests
//   groups deeper than kMaxBraceDepth, or is longer than kMaxBracePatternBytes.
[[nodiscard]] std::vector<std::string> brace_expand(std::string_view pattern);

// Returns: brace_expand of each pattern, concatenated in order.
// Throws: ArgumentError as brace_expand, also when the total exceeds
//   kMaxBraceExpansions (naming the pattern that crossed it).
[[nodiscard]] std::vector<std::string> brace_expand_all(std::span<const std::string> patterns);

}  // namespace tensorcom
