// Text from files and the environment shown safely (printable, every Error's message), JSON keys given twice, and
// the CONVTUNE_* variables checked before any work.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "convtune/convtune.h"
#include "src/core/environment.h"
#include "src/core/json_reader.h"
#include "src/core/printable.h"

using namespace convtune;

namespace {

bool has_text(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Sets a variable for one scope, then puts back what was there.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

std::string environment_refusal() {
  try {
    check_environment();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Printable, ControlCharactersAndBadBytesAreEscapedTextKept) {
  EXPECT_EQ(printable("plain text, tabs\tand\nnewlines"), "plain text, tabs\tand\nnewlines");
  EXPECT_EQ(printable("\x1b[31mRED\x1b[0m"), "\\x1b[31mRED\\x1b[0m");                     // db-devname-terminal-escape
  EXPECT_EQ(printable(std::string("R=3\0,K=9", 8)), "R=3\\x00,K=9");                       // suite-nul-truncates-message
  EXPECT_EQ(printable("a\rb\x7f"), "a\\x0db\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");  // UTF-8 kept
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\u009b2J");                                      // C1 CSI
  EXPECT_EQ(printable("\xff\xfe ok \xc3"), "\\xff\\xfe ok \\xc3");                          // not UTF-8
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");                                  // a surrogate
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                                          // overlong
  const std::string once = printable("\x1b\xff\\x00");
  EXPECT_EQ(printable(once), once);  // idempotent: an error wrapped in another is escaped once
}

TEST(Printable, PiecesJoinAcrossASplitCharacter) {
  std::string out;
  const std::string text = "ab\xe2\x82\xac";
  EXPECT_EQ(append_printable(std::string_view(text).substr(0, 4), out, false), 2u);  // the euro sign cut short
  EXPECT_EQ(out, "ab");
  EXPECT_EQ(append_printable(std::string_view(text).substr(2), out, true), 3u);
  EXPECT_EQ(out, text);
}

TEST(Printable, ErrorsCarryTheWholeMessageEscaped) {
  const InvalidArgument e(std::string("layer a: R='3") + '\0' + "' is not an integer");
  EXPECT_EQ(std::string(e.what()), "layer a: R='3\\x00' is not an integer");
  EXPECT_TRUE(has_text(Error("\x1b]0;title\x07").what(), "\\x1b]0;title\\x07"));
}

TEST(JsonReader, AKeyTwiceIsRefusedOrListed) {
  try {
    parse_json(R"({"entries": [], "entries": [1]})");
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(has_text(e.what(), "the key \"entries\" appears twice in one object")) << e.what();
  }
  try {
    parse_json(R"({"entries": [{"a": 1, "p": {"X": 1, "X": 2}}]})");
    FAIL() << "expected an error";
  } catch (const InvalidArgument& e) {
    EXPECT_TRUE(has_text(e.what(), "(at entries[0].p): the key \"X\" appears twice")) << e.what();
  }
  std::vector<DuplicateKey> duplicates;
  const auto json = parse_json(R"({"a": 1, "e": [{"k": 1}, {"k": 2, "k": 3}], "a": 2})", kMaxJsonDepth, &duplicates);
  ASSERT_EQ(duplicates.size(), 2u);
  EXPECT_EQ(duplicates[0].path, "e[1]");
  EXPECT_EQ(duplicates[0].key, "k");
  EXPECT_EQ(duplicates[1].path, "");
  EXPECT_EQ(duplicates[1].key, "a");
  EXPECT_EQ(json["a"], 2);
}

TEST(Environment, EveryVariableIsCheckedAndNamed) {
  ASSERT_EQ(environment_refusal(), "") << "the test's own environment";
  const std::pair<const char*, const char*> bad[] = {
      {"CONVTUNE_THREADS", "two"},       {"CONVTUNE_THREADS", "0"},
      {"CONVTUNE_COLUMNS", "-3"},        {"CONVTUNE_COLUMNS", "80x"},
      {"CONVTUNE_CPU_ISA", "sse9"},      {"CONVTUNE_CPU_CACHES", "32K,5x,1M"},
      {"CONVTUNE_KERNEL_WARNINGS", "yes"}, {"CONVTUNE_OPENCL_SHARED_COMPILE_CONTEXT", "2"},
      {"CONVTUNE_EMULATE_TENSOR_CORES", "true"}, {"CONVTUNE_TUNING_DB", "/"},
      {"CONVTUNE_CACHE_DIR", "/dev/null"}, {"CONVTUNE_KERNEL_DIR", "/nonexistent/kernels"},
      {"CONVTUNE_SHIPPED_TUNING_DIR", "/etc/passwd"}, {"CONVTUNE_DATA_DIR", "/nonexistent"},
      {"CONVTUNE_SUITE_DIR", "/nonexistent"}, {"CONVTUNE_DATA", "/nonexistent/fashion"},
      {"CONVTUNE_DNNL_LIBRARY", "/nonexistent/libdnnl.so"}, {"CONVTUNE_CUDNN_LIBRARY", "/tmp"},
  };
  for (const auto& [name, value] : bad) {
    const ScopedVariable set(name, value);
    const std::string error = environment_refusal();
    EXPECT_TRUE(has_text(error, std::string(name) + "='" + value + "' is invalid")) << name << ": " << error;
    EXPECT_TRUE(has_text(error, "expected")) << error;
  }
  // Values that are fine.
  const std::pair<const char*, const char*> good[] = {
      {"CONVTUNE_THREADS", "3"},         {"CONVTUNE_CACHE_DIR", "off"},
      {"CONVTUNE_CACHE_DIR", "/nonexistent/made/later"}, {"CONVTUNE_TUNING_DB", "/nonexistent/tuning.json"},
      {"CONVTUNE_DNNL_LIBRARY", "libdnnl.so.3"}, {"CONVTUNE_KERNEL_WARNINGS", "0"},
      {"CONVTUNE_THREADS", ""},  // empty: unset
  };
  for (const auto& [name, value] : good) {
    const ScopedVariable set(name, value);
    EXPECT_EQ(environment_refusal(), "") << name << "=" << value;
  }
  // A control character in a value is shown escaped, and the message names the variable.
  const ScopedVariable set("CONVTUNE_THREADS", "\x1b[2J");
  EXPECT_TRUE(has_text(environment_refusal(), "CONVTUNE_THREADS='\\x1b[2J' is invalid")) << environment_refusal();
  EXPECT_EQ(environment_variables().size(), 18u);
}
