// Brace expansion follows bash's braces.c (brace_expand, brace_gobbler,
// expand_seqterm, mkseq) step by step, because "exactly as bash" includes its
// odd corners: which '{' opens a group, when a '}' closes one, and when a
// failed range stays literal. Backslashes are kept during expansion (they
// guard characters from the scanner) and removed at the end, as bash's quote
// removal does.
#include "tensorcom/transport/brace.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <optional>

#include "tensorcom/codec/error.h"

namespace tensorcom {
namespace {

using Strings = std::vector<std::string>;
constexpr auto npos = std::string_view::npos;

// bash's brace_whitespace: positions past either end count as whitespace.
bool is_brace_space(std::string_view s, std::size_t i) {
  if (i >= s.size()) return true;  // also i == npos, "before the start"
  return s[i] == ' ' || s[i] == '\t' || s[i] == '\n';
}

// bash ignores a '{' standing alone between whitespace, or written "{}" after
// whitespace, so that `find -exec cmd {} ,` survives.
bool is_ignored_open(std::string_view s, std::size_t i) {
  return is_brace_space(s, i - 1) && (is_brace_space(s, i + 1) || s[i + 1] == '}');
}

// bash's brace_gobbler. Returns: the index of the first unescaped `satisfy` at
// nesting level 0 from `i`, or npos. A '}' only closes the group once a ','
// or a ".." has been seen at level 0, which is why "{a}" stays literal.
std::size_t gobble(std::string_view s, std::size_t i, char satisfy) {
  int level = 0;
  bool armed = satisfy != '}';
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      ++i;  // skip the escaped character too
      continue;
    }
    if (c == satisfy && level == 0 && armed) {
      if (c == '{' && is_ignored_open(s, i)) continue;
      return i;
    }
    if (c == '{') {
      ++level;
    } else if (c == '}' && level > 0) {
      --level;
    } else if (satisfy == '}' && level == 0) {
      if (c == ',') armed = true;
      if (s.substr(i, 2) == ".." && (i + 2 == s.size() || s[i + 2] != '}')) armed = true;
    }
  }
  return npos;
}

// True when `s` holds an unescaped ',' at any depth (bash's test for "list").
bool has_separator(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\')
      ++i;
    else if (s[i] == ',')
      return true;
  }
  return false;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// strtoimax with a const end pointer. Returns: nullopt on overflow.
std::optional<std::intmax_t> to_int(const char* p, const char** end) {
  char* e = nullptr;
  errno = 0;
  const std::intmax_t value = std::strtoimax(p, &e, 10);
  *end = e;
  if (errno == ERANGE) return std::nullopt;
  return value;
}

// bash's legal_number: a whole string of digits, sign and blanks allowed.
std::optional<std::intmax_t> legal_number(const std::string& s) {
  const char* end = nullptr;
  const auto value = to_int(s.c_str(), &end);
  if (!value || end == s.c_str()) return std::nullopt;
  while (*end == ' ' || *end == '\t') ++end;
  if (end != s.c_str() + s.size()) return std::nullopt;
  return value;
}

// One parsed "{lhs..rhs[..incr]}" term; `width` > 0 asks for zero padding.
struct Sequence {
  bool letters = false;
  std::intmax_t first = 0;
  std::intmax_t last = 0;
  std::intmax_t step = 1;
  int width = 0;
};

// bash's zero-padding rule: a leading "0" or "-0" on either end pads every
// number to the width of the longer end (as written, sign included).
int pad_width(const std::string& lhs, const std::string& rhs) {
  auto padded = [](const std::string& s) {
    return (s.size() > 1 && s[0] == '0') || (s.size() > 2 && s[0] == '-' && s[1] == '0');
  };
  if (!padded(lhs) && !padded(rhs)) return 0;
  return static_cast<int>(std::max(lhs.size(), rhs.size()));
}

// Parses the right side of a range, "end[..incr]", into seq.last and
// seq.step; the end must be of seq's kind. Returns: the end as written, or
// nullopt when the side is malformed.
std::optional<std::string> parse_range_end(const std::string& rhs, Sequence& seq) {
  const char* p = rhs.c_str();
  const char* end = p + 1;
  if (seq.letters) {
    if (!is_letter(p[0]) || (p[1] != '\0' && p[1] != '.')) return std::nullopt;
    seq.last = static_cast<unsigned char>(p[0]);
  } else {
    if (!is_digit(p[0]) && !((p[0] == '+' || p[0] == '-') && is_digit(p[1]))) return std::nullopt;
    const auto last = to_int(p, &end);
    if (!last || (*end != '\0' && *end != '.')) return std::nullopt;
    seq.last = *last;
  }
  std::string written(p, end);
  if (end[0] == '.' && end[1] == '.' && end[2] != '\0') {
    const auto step = to_int(end + 2, &end);
    if (!step) return std::nullopt;
    seq.step = *step;
  }
  if (*end != '\0') return std::nullopt;
  return written;
}

// bash's expand_seqterm. Returns: the term, or nullopt when `amble` is not a
// valid range (both ends integers or both single letters, increment integer).
std::optional<Sequence> parse_sequence(std::string_view amble) {
  const auto dots = amble.find("..");
  if (dots == npos || dots == 0 || dots + 2 == amble.size()) return std::nullopt;
  const std::string lhs(amble.substr(0, dots));
  const std::string rhs(amble.substr(dots + 2));
  Sequence seq;
  const auto first = legal_number(lhs);
  seq.letters = !first;
  if (seq.letters && !(lhs.size() == 1 && is_letter(lhs[0]))) return std::nullopt;
  const auto rhs_end = parse_range_end(rhs, seq);
  if (!rhs_end) return std::nullopt;
  seq.first = seq.letters ? static_cast<unsigned char>(lhs[0]) : *first;
  if (!seq.letters) seq.width = pad_width(lhs, *rhs_end);
  return seq;
}

std::string format_term(const Sequence& seq, std::intmax_t value) {
  if (seq.letters) return std::string(1, static_cast<char>(value));
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%0*jd", seq.width, value);
  return buffer;
}

// Expands one pattern; holds it so that deep failures can name it.
class Expander {
 public:
  explicit Expander(std::string_view pattern) : pattern_(pattern) {}

  // bash's brace_expand on `text`, a piece of the pattern `depth` groups
  // deep. Groups side by side are taken in a loop (bash recurses on the rest);
  // only nesting recurses, and that is bounded.
  Strings expand(std::string_view text, std::size_t depth = 0) const {
    if (depth > kMaxBraceDepth) {
      throw ArgumentError("brace pattern " + shown() + " nests groups more than " + std::to_string(kMaxBraceDepth) +
                          " deep");
    }
    Strings result{""};
    for (;;) {
      const std::size_t open = find_group(text);
      if (open == npos) return product(result, {std::string(text)});
      const std::size_t close = gobble(text, open + 1, '}');
      const std::string_view amble = text.substr(open + 1, close - open - 1);
      result = product(product(result, {std::string(text.substr(0, open))}), expand_group(amble, depth));
      text = text.substr(close + 1);
      if (text.empty()) return result;
    }
  }

  void check_count(std::size_t count) const {
    if (count <= kMaxBraceExpansions) return;
    throw ArgumentError("brace pattern " + shown() + " expands to more than " + std::to_string(kMaxBraceExpansions) +
                        " strings");
  }

 private:
  // Returns: the first '{' whose group closes, or npos. bash skips an opening
  // brace that never closes and tries the next one.
  static std::size_t find_group(std::string_view text) {
    for (std::size_t i = gobble(text, 0, '{'); i != npos; i = gobble(text, i + 1, '{')) {
      if (gobble(text, i + 1, '}') != npos) return i;
    }
    return npos;
  }

  // The strings one "{amble}" stands for: a list, a range, or itself.
  Strings expand_group(std::string_view amble, std::size_t depth) const {
    if (has_separator(amble)) return expand_list(amble, depth);
    if (const auto seq = parse_sequence(amble)) return expand_sequence(*seq);
    return {"{" + std::string(amble) + "}"};
  }

  // bash's expand_amble: split at level-0 commas and expand each item.
  Strings expand_list(std::string_view amble, std::size_t depth) const {
    Strings result;
    for (std::size_t start = 0;;) {
      const std::size_t comma = gobble(amble, start, ',');
      Strings item = expand(amble.substr(start, comma == npos ? npos : comma - start), depth + 1);
      check_count(result.size() + item.size());
      result.insert(result.end(), std::make_move_iterator(item.begin()), std::make_move_iterator(item.end()));
      if (comma == npos) return result;
      start = comma + 1;
    }
  }

  // bash's mkseq: the step's sign is ignored and zero means one.
  Strings expand_sequence(const Sequence& seq) const {
    // Unsigned arithmetic: the distance between two intmax_t ends, or the
    // size of INTMAX_MIN, does not fit intmax_t; it wraps back correctly.
    using U = std::uintmax_t;
    const bool down = seq.last < seq.first;
    const U distance = down ? U(seq.first) - U(seq.last) : U(seq.last) - U(seq.first);
    const U step = seq.step == 0 ? 1 : seq.step < 0 ? U(0) - U(seq.step) : U(seq.step);
    const U steps = distance / step;  // count - 1; count itself may not fit
    check_count(steps >= kMaxBraceExpansions ? kMaxBraceExpansions + 1 : std::size_t(steps + 1));
    Strings result;
    result.reserve(std::size_t(steps + 1));
    for (U k = 0; k <= steps; ++k) {
      const U offset = k * step;
      result.push_back(format_term(seq, std::intmax_t(down ? U(seq.first) - offset : U(seq.first) + offset)));
    }
    return result;
  }

  // bash's array_concat: every left string followed by every right string.
  Strings product(const Strings& left, const Strings& right) const {
    check_count(left.size() * right.size());  // both <= the limit: no overflow
    Strings result;
    result.reserve(left.size() * right.size());
    for (const auto& l : left) {
      for (const auto& r : right) result.push_back(l + r);
    }
    return result;
  }

  // The pattern quoted for a message, cut if long.
  std::string shown() const {
    constexpr std::size_t kShown = 100;
    if (pattern_.size() <= kShown) return "'" + std::string(pattern_) + "'";
    return "'" + std::string(pattern_.substr(0, kShown)) + "...' (" + std::to_string(pattern_.size()) + " bytes)";
  }

  std::string_view pattern_;
};

// Quote removal: "\x" becomes "x"; a final lone backslash stays.
std::string unescape(const std::string& s) {
  if (s.find('\\') == std::string::npos) return s;
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

std::vector<std::string> brace_expand(std::string_view pattern) {
  if (pattern.size() > kMaxBracePatternBytes) {
    throw ArgumentError("brace pattern of " + std::to_string(pattern.size()) + " bytes is longer than the limit of " +
                        std::to_string(kMaxBracePatternBytes) + " (give long lists as separate arguments)");
  }
  Strings result = Expander(pattern).expand(pattern);
  for (auto& s : result) s = unescape(s);
  return result;
}

std::vector<std::string> brace_expand_all(std::span<const std::string> patterns) {
  Strings result;
  for (const auto& pattern : patterns) {
    Strings more = brace_expand(pattern);
    Expander(pattern).check_count(result.size() + more.size());
    result.insert(result.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return result;
}

}  // namespace tensorcom
