#include "json.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>

#include "tensorcom/codec/error.h"
#include "tensorcom/codec/regular_file.h"

namespace tensorcom::tools {

namespace {

// ImageNet's table is 40 KB; a million classes of long names fit in this.
constexpr std::uint64_t kMostClassTableBytes = std::uint64_t{256} << 20;

// "line L, column C" (both from 1) of the byte at offset.
std::string line_and_column(std::string_view text, std::size_t offset) {
  const std::string_view before = text.substr(0, std::min(offset, text.size()));
  const std::size_t newline = before.rfind('\n');
  const std::size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  return "line " + std::to_string(std::ranges::count(before, '\n') + 1) + ", column " +
         std::to_string(before.size() - line_start + 1);
}

// nlohmann's what() reads "[json.exception.parse_error.101] parse error at
// line 2, column 7: syntax error while parsing value - invalid literal; ...".
// The reason is what follows its position, which the message gives already.
std::string parse_error_reason(std::string_view what) {
  const std::size_t colon = what.find(": ");
  return std::string(colon == std::string_view::npos ? what : what.substr(colon + 2));
}

// Builds the table from nlohmann's SAX events. nlohmann reads its input one
// byte at a time, as it needs it, so the stream's read position is where the
// parser stands: this reader's own errors (a label twice, a value that names
// no class) get a position as its syntax errors do.
class ClassTableReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  // input reads text; text, source and input must outlive the reader.
  ClassTableReader(std::string_view text, std::string_view source, std::istream& input)
      : text_(text), source_(source), input_(input) {}

  [[nodiscard]] ClassNames take() { return std::move(names_); }

  bool start_object(std::size_t) override {
    if (depth_ != 0) refuse("an object");
    object_ = true;
    ++depth_;
    return true;
  }

  bool key(string_t& key) override {
    label_ = parse_label(key);
    if (names_.contains(label_)) fail("label " + std::to_string(label_) + " appears twice");
    return true;
  }

  bool end_object() override {
    --depth_;
    return true;
  }

  bool start_array(std::size_t) override {
    if (depth_ == 2) refuse("an array");
    last_.reset();
    ++depth_;
    return true;
  }

  bool end_array() override {
    if (--depth_ == 1) {
      if (!last_) fail(label_text() + ": an empty array names no class");
      add(std::move(*last_));
    }
    return true;
  }

  bool string(string_t& value) override {
    if (depth_ == 0) refuse("a string");
    if (depth_ == 2) {
      last_ = std::move(value);
    } else {
      add(std::move(value));
    }
    return true;
  }

  bool null() override { refuse("null"); }
  bool boolean(bool) override { refuse("a boolean"); }
  bool number_integer(number_integer_t) override { refuse("a number"); }
  bool number_unsigned(number_unsigned_t) override { refuse("a number"); }
  bool number_float(number_float_t, const string_t&) override { refuse("a number"); }
  bool binary(binary_t&) override { refuse("binary data"); }

  // position: bytes read, the offending one included.
  bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& error) override {
    fail_at(position == 0 ? 0 : position - 1, parse_error_reason(error.what()));
  }

 private:
  [[noreturn]] void fail_at(std::size_t offset, const std::string& what) const {
    throw FormatError(std::string(source_) + ": " + line_and_column(text_, offset) + ": " + what, offset);
  }

  // At the last byte read: the end of the key or value being refused.
  [[noreturn]] void fail(const std::string& what) const {
    const auto read = static_cast<std::size_t>(input_.rdbuf()->pubseekoff(0, std::ios_base::cur, std::ios_base::in));
    fail_at(read == 0 ? 0 : read - 1, what);
  }

  // A value of the wrong kind (kind: "a number", "an object", ...).
  [[noreturn]] void refuse(const std::string& kind) const {
    if (depth_ == 0) fail("a class table is a JSON array or object, not " + kind);
    if (depth_ == 1) fail(label_text() + ": expected a class name (a string, or an array of strings), not " + kind);
    fail(label_text() + ": expected a string in the class name array, not " + kind);
  }

  // The label of the value being read: its key, or its position in a list.
  [[nodiscard]] std::int64_t label() const { return object_ ? label_ : next_position_; }
  [[nodiscard]] std::string label_text() const { return "label " + std::to_string(label()); }

  [[nodiscard]] std::int64_t parse_label(const std::string& key) const {
    std::int64_t label = 0;
    auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), label);
    if (key.empty() || error != std::errc{} || end != key.data() + key.size()) {
      fail("key \"" + key + "\" is not a class label (an integer of the label tensor, in decimal)");
    }
    return label;
  }

  void add(std::string name) {
    names_.emplace(label(), std::move(name));
    ++next_position_;
  }

  std::string_view text_;
  std::string_view source_;
  std::istream& input_;
  ClassNames names_;
  int depth_ = 0;                    // containers open: 1 in the table, 2 in a name array
  bool object_ = false;              // the table is an object (else a list)
  std::int64_t label_ = 0;           // an object's last key
  std::int64_t next_position_ = 0;   // a list's next label
  std::optional<std::string> last_;  // a name array's last string so far
};

}  // namespace

ClassNames parse_class_names(std::string_view text, std::string_view source) {
  std::istringstream input{std::string(text)};
  ClassTableReader reader(text, source, input);
  nlohmann::json::sax_parse(input, &reader);  // errors throw from the reader
  return reader.take();
}

ClassNames read_class_names(const std::filesystem::path& path) {
  return parse_class_names(read_regular_file(path, kMostClassTableBytes, "class table"), path.string());
}

}  // namespace tensorcom::tools
