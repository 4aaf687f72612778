// The tools' JSON: numbers as the tools print them, and the class-name table
// tensorshow reads, in each accepted form and with each kind of error.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "json.h"
#include "tensorcom/codec/error.h"

using namespace tensorcom;
using namespace tensorcom::tools;

namespace {

// The message of the FormatError that parsing text throws ("" if none).
std::string class_table_error(const std::string& text) {
  try {
    (void)parse_class_names(text, "t.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("numbers read back exactly, NaN and infinities as null") {
  SUBCASE("doubles") {
    for (double x : {0.1, 1.0 / 3, 0.25, -2.5e-300, 1e21, std::numeric_limits<double>::max(),
                     std::numeric_limits<double>::denorm_min()}) {
      const std::string text = Json(x).dump();
      CHECK(Json::parse(text).get<double>() == x);
    }
    CHECK(Json(0.25).dump() == "0.25");
    CHECK(Json(0.1).dump() == "0.1");
  }
  SUBCASE("integers stay integers") {
    CHECK(Json(std::numeric_limits<std::uint64_t>::max()).dump() == "18446744073709551615");
    CHECK(Json(std::int64_t{-7}).dump() == "-7");
  }
  SUBCASE("what JSON cannot spell") {
    CHECK(Json(std::nan("")).dump() == "null");
    CHECK(Json(std::numeric_limits<double>::infinity()).dump() == "null");
    CHECK(Json(-std::numeric_limits<double>::infinity()).dump() == "null");
  }
}

TEST_CASE("objects keep their fields in the order added, on one line") {
  Json object = {{"summary", true}, {"batches", 3}, {"a", "x\"\n"}};
  object["counts"] = Json{{"10", 1}, {"2", 1}};
  CHECK(object.dump() == R"({"summary":true,"batches":3,"a":"x\"\n","counts":{"10":1,"2":1}})");
}

TEST_CASE("class tables in every accepted form") {
  const ClassNames want = {{0, "tench"}, {1, "goldfish"}, {2, "shark"}};
  SUBCASE("a list: label = position") { CHECK(parse_class_names(R"(["tench", "goldfish", "shark"])", "t") == want); }
  SUBCASE("an object with decimal keys, in any order") {
    CHECK(parse_class_names(R"({"2": "shark", "0": "tench", "1": "goldfish"})", "t") == want);
    CHECK(parse_class_names(R"({"-1": "background", "7": "x"})", "t") == ClassNames{{-1, "background"}, {7, "x"}});
  }
  SUBCASE("arrays name the class by their last string, as Keras' imagenet_class_index.json") {
    CHECK(parse_class_names(R"({"0": ["n01440764", "tench"], "1": ["n01443537", "goldfish"], "2": ["shark"]})", "t") ==
          want);
    CHECK(parse_class_names(R"([["a", "tench"], "goldfish", ["shark"]])", "t") == want);
  }
  SUBCASE("escapes and UTF-8") {
    CHECK(parse_class_names(R"(["caf\u00e9 \"x\"", "\ud83d\udc1f", "caf\u00e9"])", "t") ==
          ClassNames{{0, "caf\xc3\xa9 \"x\""}, {1, "\xf0\x9f\x90\x9f"}, {2, "caf\xc3\xa9"}});
  }
  SUBCASE("empty tables") {
    CHECK(parse_class_names(" [] ", "t").empty());
    CHECK(parse_class_names("{}\n", "t").empty());
  }
}

TEST_CASE("class table errors name the source, the line and column, and the byte") {
  SUBCASE("syntax errors, where nlohmann stopped") {
    // A bare word, and the bare-key form {0: "tench"}, which is not JSON.
    CHECK(class_table_error("{\"0\": \"tench\",\n \"1\": goldfish}").starts_with("t.json: line 2, column 7: "));
    CHECK(class_table_error("{\"0\": \"tench\",\n \"1\": goldfish}").ends_with(" (at byte 21)"));
    CHECK(class_table_error(R"({0: "tench"})").starts_with("t.json: line 1, column 2: "));
    CHECK(class_table_error(R"(["tench",])").starts_with("t.json: line 1, column 10: "));
    CHECK(class_table_error(R"(["tench"] x)").starts_with("t.json: line 1, column 11: "));
    CHECK(class_table_error(R"(["tench" // no comments)").starts_with("t.json: line 1, column 10: "));
    CHECK(class_table_error("").starts_with("t.json: line 1, column 1: "));
    CHECK(class_table_error(R"(["te)").starts_with("t.json: line 1, column 5: "));
  }
  SUBCASE("a label twice, at the second key") {
    CHECK(class_table_error(R"({"0": "tench", "0": "again"})") ==
          "t.json: line 1, column 18: label 0 appears twice (at byte 17)");
    CHECK(class_table_error(R"({"0": "tench", "00": "again"})").starts_with("t.json: line 1, column 19: label 0 "));
  }
  SUBCASE("keys that are not labels") {
    for (const char* key : {"tench", "", "1.5", " 1", "+1", "1x", "99999999999999999999"}) {
      CAPTURE(key);
      CHECK(class_table_error("{\"" + std::string(key) + "\": \"a\"}")
                .find(": key \"" + std::string(key) + "\" is not a class label") != std::string::npos);
    }
  }
  SUBCASE("values that name no class") {
    // nlohmann reads one byte past a number: the position is the '}' after the 5.
    CHECK(class_table_error(R"({"0": "tench", "1": 5})") ==
          "t.json: line 1, column 22: label 1: expected a class name (a string, or an array of strings), "
          "not a number (at byte 21)");
    CHECK(class_table_error(R"({"0": "tench", "1": true})").starts_with("t.json: line 1, column 24: label 1: "));
    CHECK(class_table_error(R"(["tench", null])").find(": label 1: expected a class name") != std::string::npos);
    CHECK(class_table_error(R"(["tench", {}])").find("not an object") != std::string::npos);
    CHECK(class_table_error(R"({"3": []})").find(": label 3: an empty array names no class") != std::string::npos);
    CHECK(class_table_error(R"({"3": ["a", 1]})").find(": label 3: expected a string in the class name array") !=
          std::string::npos);
    CHECK(class_table_error(R"({"3": ["a", ["b"]]})").find("not an array") != std::string::npos);
    CHECK(class_table_error(R"("tench")").find("a class table is a JSON array or object, not a string") !=
          std::string::npos);
  }
}

TEST_CASE("a class file that cannot be read is an IoError naming it") {
  try {
    (void)read_class_names("/nonexistent/classes.json");
    FAIL("no error");
  } catch (const IoError& e) {
    CHECK(std::string(e.what()).find("/nonexistent/classes.json") != std::string::npos);
  }
}
