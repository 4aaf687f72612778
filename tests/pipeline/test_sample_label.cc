// Labels from .cls text: what is accepted, and what each refusal says.
#include <doctest/doctest.h>

#include <string>

#include "sample_label.h"

using namespace tensorcom::pipeline;
namespace imaging = tensorcom::imaging;

namespace {

Label label_of_text(std::string text, std::int32_t classes = 1000) {
  RawSample sample;
  sample.label = std::move(text);
  return label_of(sample, classes);
}

}  // namespace

TEST_CASE("labels from .cls text") {
  SUBCASE("decimal, with whitespace around it") {
    CHECK(label_of_text("7").value == 7);
    CHECK(label_of_text(" 42\n").value == 42);
    CHECK(label_of_text("\t0\r\n").problem == std::nullopt);
    CHECK(label_of_text("999").problem == std::nullopt);
  }
  SUBCASE("not a number") {
    for (const char* text : {"", "  ", "abc", "7x", "7 8", "+7", "0x10", "1e3", "3.0"}) {
      CAPTURE(text);
      Label label = label_of_text(text);
      CHECK(label.problem == imaging::Problem::kBadLabel);
      CHECK(label.value == 0);
    }
  }
  SUBCASE("the detail quotes at most 40 bytes of the text") {
    Label label = label_of_text(std::string(1000, 'z'));
    CHECK(label.detail == "cls is '" + std::string(40, 'z') + "'");
  }
  SUBCASE("out of range") {
    CHECK(label_of_text("-1").problem == imaging::Problem::kLabelOutOfRange);
    CHECK(label_of_text("1000").problem == imaging::Problem::kLabelOutOfRange);
    CHECK(label_of_text("1000").detail == "1000");
    CHECK(label_of_text("2147483648", 0).problem == imaging::Problem::kLabelOutOfRange);
    CHECK(label_of_text("99999999999999999999").problem == imaging::Problem::kBadLabel);  // past int64
  }
  SUBCASE("classes <= 0: any int32 that is not negative") {
    CHECK(label_of_text("2147483647", 0).value == 2147483647);
    CHECK(label_of_text("5000", -1).value == 5000);
  }
}

TEST_CASE("labels without text") {
  RawSample sample;
  SUBCASE("no .cls member") {
    Label label = label_of(sample, 10);
    CHECK(label.problem == imaging::Problem::kMissingLabel);
    CHECK(label.detail == "no .cls member");
  }
  SUBCASE("a known label wins over the text") {
    sample.known_label = 4;
    sample.label = "3";
    CHECK(label_of(sample, 10).value == 4);
    CHECK(label_of(sample, 10).problem == std::nullopt);
  }
}
