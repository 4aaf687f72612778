// Escaping outside names for messages, and shard names safe to tell peers.
#include <doctest/doctest.h>

#include "tensorcom/formats/printable.h"

using namespace tensorcom::formats;

TEST_CASE("control characters are escaped, UTF-8 is kept") {
  CHECK(printable("plain/name.jpg") == "plain/name.jpg");
  CHECK(printable("a\nb\tc\\d") == "a\\nb\\tc\\\\d");
  CHECK(printable("\x1b[2J\x7f") == "\\x1b[2J\\x7f");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(printable(std::string(600, 'x')).size() == 512 + 3);
  CHECK(printable("abcdef", 3) == "abc...");
}

TEST_CASE("bytes that are not UTF-8, and C1 controls, are shown as hex") {
  CHECK(printable("caf\xe9") == "caf\\xe9");  // Latin-1
  CHECK(printable("\xc2\x9b"
                  "2J") == "\\xc2\\x9b2J");                    // U+009B, CSI
  CHECK(printable("\xc2\xa0") == "\xc2\xa0");                  // U+00A0 is text
  CHECK(printable("\xe2\x82") == "\\xe2\\x82");                // cut short
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");       // a surrogate
  CHECK(printable("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");  // an emoji
}

TEST_CASE("a pipe shard is told by its file's name, never its command") {
  CHECK(public_shard_name("/data/train-000001.tar", 4) == "/data/train-000001.tar");
  CHECK(public_shard_name("pipe:curl -s https://u:pw@host/x/train-000002.tar?sig=abc", 4) == "train-000002.tar");
  CHECK(public_shard_name("pipe:aws s3 cp 's3://bucket/a/b.tar.gz' -", 4) == "b.tar.gz");
  CHECK(public_shard_name("pipe:secret-command --token xyz", 4) == "pipe-shard-4");
}

TEST_CASE("a URL is told without its user, password or query") {
  CHECK(redacted_url("http://host/a/train-0001.tar") == "http://host/a/train-0001.tar");
  CHECK(redacted_url("https://u:pw@host:8443/a.tar?sig=abc&exp=1") == "https://host:8443/a.tar?...");
  CHECK(redacted_url("https://u:p@w@host/a.tar") == "https://host/a.tar");              // the authority's last '@'
  CHECK(redacted_url("http://host/users/@me/a.tar") == "http://host/users/@me/a.tar");  // '@' in the path is kept
  CHECK(redacted_url("http://u:pw@host?token=x") == "http://host?...");
  CHECK(redacted_url("http://host/a.tar#frag") == "http://host/a.tar?...");
  CHECK(redacted_url("not a url") == "not a url");
  CHECK(public_shard_name("https://u:pw@host/x/train-000002.tar?sig=abc", 4) == "https://host/x/train-000002.tar?...");
  CHECK(public_shard_name("HTTP://u:pw@host/b.tar", 4) == "HTTP://host/b.tar");
}

TEST_CASE("is_utf8 takes well-formed UTF-8 only, as JSON needs") {
  CHECK(is_utf8(""));
  CHECK(is_utf8("n01440764 tench"));
  CHECK(is_utf8("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x90\x9f"));
  CHECK_FALSE(is_utf8("caf\xe9"));                    // Latin-1
  CHECK_FALSE(is_utf8("\xc3"));                       // cut short
  CHECK_FALSE(is_utf8("\xc0\xaf"));                   // overlong '/'
  CHECK_FALSE(is_utf8("\xed\xa0\x80"));               // a surrogate
  CHECK_FALSE(is_utf8("\xf4\x90\x80\x80"));           // past U+10FFFF
  CHECK_FALSE(is_utf8(std::string_view("\x80", 1)));  // a stray continuation byte
}
