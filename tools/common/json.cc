#include "json.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "tensorcom/error.h"

namespace tensorcom::tools {

// ---- writing ----

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof text, value);
  if (error != std::errc{}) return "null";  // cannot happen: 32 chars hold any double
  return std::string(text, end);
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_array(std::span<const std::string> values) {
  std::string out = "[";
  for (const std::string& value : values) out += (out.size() > 1 ? "," : "") + value;
  return out + "]";
}

std::string json_number_array(std::span<const double> values) {
  std::string out = "[";
  for (double value : values) out += (out.size() > 1 ? "," : "") + json_number(value);
  return out + "]";
}

JsonObject& JsonObject::add_json(std::string_view key, std::string_view json) {
  if (!fields_.empty()) fields_ += ',';
  fields_ += json_string(key);
  fields_ += ':';
  fields_ += json;
  return *this;
}

JsonObject& JsonObject::add_number(std::string_view key, double value) { return add_json(key, json_number(value)); }

JsonObject& JsonObject::add_bool(std::string_view key, bool value) { return add_json(key, value ? "true" : "false"); }

JsonObject& JsonObject::add_string(std::string_view key, std::string_view value) {
  return add_json(key, json_string(value));
}

// ---- reading class names ----

namespace {

// A recursive-descent reader for the few shapes parse_class_names accepts.
// Every error names the source, line, column and byte.
class ClassNameParser {
 public:
  ClassNameParser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  ClassNames parse() {
    skip_space();
    ClassNames names;
    if (peek() == '[') {
      parse_list(names);
    } else if (peek() == '{') {
      parse_object(names);
    } else {
      fail("expected '{' or '[' at the start of the class table");
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the class table");
    return names;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    std::size_t line = 1;
    std::size_t column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw FormatError(std::string(source_) + ": line " + std::to_string(line) + ", column " + std::to_string(column) +
                          ": " + what,
                      pos_);
  }

  [[nodiscard]] static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

  [[nodiscard]] int peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }

  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  void expect(char c, const char* context) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "' " + context);
    ++pos_;
  }

  // Consumes ',' and returns true, or consumes `close` and returns false.
  bool next_item(char close, const char* container) {
    skip_space();
    if (peek() == ',') {
      ++pos_;
      return true;
    }
    if (peek() == close) {
      ++pos_;
      return false;
    }
    fail(std::string("expected ',' or '") + close + "' in " + container);
  }

  void parse_list(ClassNames& names) {
    ++pos_;  // '['
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    std::int64_t label = 0;
    do {
      skip_space();
      names[label++] = parse_name();
    } while (next_item(']', "the class list"));
  }

  void parse_object(ClassNames& names) {
    ++pos_;  // '{'
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    do {
      skip_space();
      std::size_t key_pos = pos_;
      std::int64_t label = parse_label();
      expect(':', "after a class label");
      skip_space();
      std::string name = parse_name();
      if (!names.emplace(label, std::move(name)).second) {
        pos_ = key_pos;
        fail("label " + std::to_string(label) + " appears twice");
      }
    } while (next_item('}', "the class object"));
  }

  // A key: a decimal integer, quoted or bare.
  std::int64_t parse_label() {
    std::size_t start = pos_;
    std::string digits = peek() == '"' ? parse_string() : bare_integer();
    std::int64_t label = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), label);
    if (digits.empty() || error != std::errc{} || end != digits.data() + digits.size()) {
      pos_ = start;
      fail("class label '" + digits + "' is not an integer (labels are the integers of the label tensor)");
    }
    return label;
  }

  std::string bare_integer() {
    std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    while (peek() >= '0' && peek() <= '9') ++pos_;
    if (pos_ == start) fail("expected a class label (an integer or a quoted integer)");
    return std::string(text_.substr(start, pos_ - start));
  }

  // A value: a string, or an array of strings whose last one is the name.
  std::string parse_name() {
    if (peek() == '"') return parse_string();
    if (peek() != '[') fail("expected a class name (a string, or an array of strings)");
    ++pos_;
    std::optional<std::string> last;
    skip_space();
    if (peek() == ']') fail("an empty array names no class");
    do {
      skip_space();
      if (peek() != '"') fail("expected a string in the class name array");
      last = parse_string();
    } while (next_item(']', "the class name array"));
    return *last;
  }

  std::string parse_string() {
    ++pos_;  // '"'
    std::string out;
    for (;;) {
      int c = peek();
      if (c < 0) fail("unterminated string");
      if (c < 0x20) fail("control character in a string");
      ++pos_;
      if (c == '"') return out;
      if (c == '\\') {
        parse_escape(out);
      } else {
        out += static_cast<char>(c);
      }
    }
  }

  void parse_escape(std::string& out) {
    int c = peek();
    ++pos_;
    switch (c) {
      case '"': out += '"'; return;
      case '\\': out += '\\'; return;
      case '/': out += '/'; return;
      case 'b': out += '\b'; return;
      case 'f': out += '\f'; return;
      case 'n': out += '\n'; return;
      case 'r': out += '\r'; return;
      case 't': out += '\t'; return;
      case 'u': append_utf8(out, parse_code_point()); return;
      default: --pos_; fail("bad escape in a string");
    }
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("\\u needs four hex digits");
    unsigned value = 0;
    auto [end, error] = std::from_chars(text_.data() + pos_, text_.data() + pos_ + 4, value, 16);
    if (error != std::errc{} || end != text_.data() + pos_ + 4) fail("\\u needs four hex digits");
    pos_ += 4;
    return value;
  }

  // After "\u": one code point, joining a UTF-16 surrogate pair.
  unsigned parse_code_point() {
    unsigned high = parse_hex4();
    if (high >= 0xDC00 && high <= 0xDFFF) fail("lone low surrogate in \\u escape");
    if (high < 0xD800 || high > 0xDBFF) return high;
    if (text_.substr(pos_, 2) != "\\u") fail("high surrogate without a low one");
    pos_ += 2;
    unsigned low = parse_hex4();
    if (low < 0xDC00 || low > 0xDFFF) fail("high surrogate without a low one");
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

}  // namespace

ClassNames parse_class_names(std::string_view text, std::string_view source) {
  return ClassNameParser(text, source).parse();
}

ClassNames read_class_names(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path.string() + "'", errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError("cannot read '" + path.string() + "'", EIO);
  return parse_class_names(text.str(), path.string());
}

}  // namespace tensorcom::tools
