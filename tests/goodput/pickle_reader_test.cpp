// The pickle reader reads the plain data of protocols 2 to 5 and refuses everything else by name.
#include "goodput/pickle_reader.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "host/error.hpp"

namespace sdc::goodput {
namespace {

std::string b(std::initializer_list<int> bytes) {
  std::string s;
  for (int c : bytes) s += static_cast<char>(c);
  return s;
}
const std::string kProto2 = b({0x80, 2});
std::string ustr(const std::string& s) { return b({0x8c, static_cast<int>(s.size())}) + s; }

std::string error_of(const std::string& data) {
  try {
    read_pickle(data);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(PickleReader, ReadsPlainDataWithTheMemo) {
  // {"a": [1, -2, 300, 70000, True, None, 1.5, "x"], "b": "x" (from the memo), "t": (1, 2), "n": {}}
  const std::string p = kProto2 + "}" + b({'q', 0, '('}) + ustr("a") + "]" + b({'(', 'K', 1}) +
                        b({'J', 0xfe, 0xff, 0xff, 0xff}) + b({'M', 0x2c, 0x01}) + b({'J', 0x70, 0x11, 0x01, 0x00}) +
                        b({0x88, 'N'}) + b({'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}) + ustr("x") + b({'q', 1, 'e'}) +
                        ustr("b") + b({'h', 1}) + ustr("t") + b({'K', 1, 'K', 2, 0x86}) + ustr("n") + "}" +
                        b({'u', '.'});
  const nlohmann::json expected = {
      {"a", {1, -2, 300, 70000, true, nullptr, 1.5, "x"}}, {"b", "x"}, {"t", {1, 2}}, {"n", nlohmann::json::object()}};
  EXPECT_EQ(read_pickle(p), expected);
}

TEST(PickleReader, ReadsLongIntegersToSixtyFourBits) {
  EXPECT_EQ(read_pickle(kProto2 + b({0x8a, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '.'})), -1);
  EXPECT_EQ(read_pickle(kProto2 + b({0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, '.'})).get<uint64_t>(),
            UINT64_MAX);
  EXPECT_EQ(read_pickle(kProto2 + b({0x8a, 8, 0x00, 0xda, 0x4c, 0x7f, 0x6b, 0x5c, 0xee, 0x18, '.'})),
            int64_t{0x18ee5c6b7f4cda00});
  EXPECT_EQ(read_pickle(kProto2 + b({0x8a, 0, '.'})), 0);
  EXPECT_NE(error_of(kProto2 + b({0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1, '.'})).find("wider than 64 bits"),
            std::string::npos);
}

TEST(PickleReader, RefusesWhatBuildsObjectsByName) {
  const std::vector<std::pair<int, const char*>> refused = {
      {'c', "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},     {'b', "BUILD"},     {'i', "INST"},
      {'o', "OBJ"},    {0x81, "NEWOBJ"},       {0x92, "NEWOBJ_EX"}, {'Q', "BINPERSID"}, {0x8f, "EMPTY_SET"}};
  for (const auto& [op, name] : refused) {
    const std::string e = error_of(kProto2 + b({')', ')', op, '.'}));
    EXPECT_EQ(
        e, "byte 4: opcode " + std::string(name) + " (0x" + (op < 16 ? "0" : "") + [](int v) {
          char h[4];
          std::snprintf(h, sizeof h, "%02x", v);
          return std::string(h);
        }(op) + ") is refused: only plain data is read");
  }
  // pickle.dumps(datetime.datetime(2027, 1, 1), protocol=2) starts with GLOBAL.
  EXPECT_NE(error_of(kProto2 + "cdatetime\ndatetime\n").find("GLOBAL"), std::string::npos);
  EXPECT_EQ(error_of(kProto2 + b({0xff})), "byte 2: unknown opcode 0xff");
}

TEST(PickleReader, RefusesOtherProtocols) {
  EXPECT_EQ(error_of("(dp0\n."), "byte 0: not a pickle of protocol 2 or later");
  EXPECT_EQ(error_of(b({0x80, 6, 'N', '.'})), "byte 0: pickle protocol 6 (2 to 5 are read)");
  EXPECT_EQ(error_of(""), "byte 0: not a pickle of protocol 2 or later");
}

TEST(PickleReader, EveryTruncationIsAnError) {
  const std::string p = kProto2 + "}" + b({'q', 0, '('}) + ustr("key") + "]" + b({'K', 7, 'a'}) + ustr("v") +
                        b({'J', 1, 2, 3, 4, 'u', '.'});
  ASSERT_EQ(read_pickle(p), (nlohmann::json{{"key", {7}}, {"v", 0x04030201}}));
  for (size_t n = 0; n < p.size(); ++n) EXPECT_NE(error_of(p.substr(0, n)), "no error") << n;
}

TEST(PickleReader, BoundsWhatTheMemoCanMultiply) {
  // A list of two copies of the last, 64 times: 2^64 values from 400 bytes.
  std::string p = kProto2 + b({']', 'q', 0, '0'});
  for (int k = 0; k < 64; ++k) p += b({'(', 'h', 0, 'h', 0, 'l', 'q', 0, '0'});
  p += b({'h', 0, '.'});
  EXPECT_NE(error_of(p).find("more values than the file's size allows"), std::string::npos);
  // A list that holds itself.
  EXPECT_NE(error_of(kProto2 + b({']', 'q', 0, 'h', 0, 'a', '.'})).find("nesting deeper than 64"), std::string::npos);
}

TEST(PickleReader, StringsMustBeUtf8) {
  EXPECT_EQ(read_pickle(kProto2 + ustr("\xc3\xa9\xe2\x82\xac\xf0\x9f\x8f\x96") + "."),
            "\xc3\xa9\xe2\x82\xac\xf0\x9f\x8f\x96");
  for (const char* bad : {"\xff", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\x80"}) {
    EXPECT_EQ(error_of(kProto2 + ustr(bad) + "."), "byte 2: a string that is not UTF-8") << bad;
  }
}

TEST(PickleReader, RefusesABrokenMachine) {
  EXPECT_EQ(error_of(kProto2 + b({'h', 5, '.'})), "byte 2: memo index 5 was never put");
  EXPECT_EQ(error_of(kProto2 + b({'N', 'N', '.'})), "byte 4: STOP with a stack that is not one value");
  EXPECT_EQ(error_of(kProto2 + b({'a'})), "byte 2: stack underflow");
  EXPECT_EQ(error_of(kProto2 + b({'N', 'e'})), "byte 3: no MARK");
  EXPECT_EQ(error_of(kProto2 + b({'N', 'K', 1, 'a', '.'})), "byte 5: APPEND to something that is not a list");
  // A dict key that is a tuple.
  EXPECT_EQ(error_of(kProto2 + b({'}', 'K', 1, 0x85, 'K', 2, 's', '.'})),
            "byte 9: a dict key that is not a str or an int");
}

}  // namespace
}  // namespace sdc::goodput
