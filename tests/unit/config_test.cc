#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/config/file_health.h"
#include "common/config/flags.h"
#include "common/config/watched_file.h"
#include "gtest/gtest.h"

namespace ulticode::config {
namespace {

struct Settings {
  std::string listen = "127.0.0.1:1";
  int threads = 4;
  absl::Duration lease = absl::Seconds(30);
  bool notify = true;
  std::string key_file;
};

Flags Make(Settings& s) {
  Flags f("prog", "test program");
  f.String("listen", &s.listen, "address", ValidateHostPort);
  f.Int("threads", &s.threads, "threads", 1, 64);
  f.Duration("lease", &s.lease, "lease", absl::Seconds(1), absl::Minutes(10));
  f.Bool("notify", &s.notify, "notify");
  f.String("key-file", &s.key_file, "key file");
  return f;
}

absl::Status ParseArgs(Flags& f, std::vector<const char*> args) {
  args.insert(args.begin(), "prog");
  return f.Parse(static_cast<int>(args.size()), args.data());
}

TEST(FlagsTest, DefaultsFlagsAndBothSyntaxes) {
  Settings s;
  Flags f = Make(s);
  ASSERT_TRUE(ParseArgs(f, {"--threads=8", "--lease", "2m", "--notify=false"}).ok());
  EXPECT_EQ(s.threads, 8);
  EXPECT_EQ(s.lease, absl::Minutes(2));
  EXPECT_FALSE(s.notify);
  EXPECT_EQ(s.listen, "127.0.0.1:1");
}

TEST(FlagsTest, EnvironmentAppliesAndFlagWins) {
  Settings s;
  Flags f = Make(s);
  ::setenv("ULTICODE_THREADS", "16", 1);
  ::setenv("ULTICODE_LISTEN", "10.0.0.1:99", 1);
  ASSERT_TRUE(ParseArgs(f, {"--threads=2"}).ok());
  ::unsetenv("ULTICODE_THREADS");
  ::unsetenv("ULTICODE_LISTEN");
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.listen, "10.0.0.1:99");
}

TEST(FlagsTest, BadValuesNameTheSetting) {
  struct Case {
    std::vector<const char*> args;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{
           {{"--threads=0"}, "--threads: 0 is outside 1..64"},
           {{"--threads=abc"}, "--threads: \"abc\" is not an integer"},
           {{"--lease=forever"}, "--lease: \"forever\" is not a duration"},
           {{"--lease=1h"}, "--lease: 1h is outside"},
           {{"--listen=nohost"}, "--listen: \"nohost\" is not host:port"},
           {{"--listen=h:70000"}, "--listen: \"h:70000\" has no valid port"},
           {{"--notify=maybe"}, "--notify: \"maybe\" is not a boolean"},
           {{"--unknown=1"}, "unknown flag --unknown"},
           {{"stray"}, "unexpected argument \"stray\""},
           {{"--threads"}, "--threads needs a value"},
       }) {
    Settings s;
    Flags f = Make(s);
    absl::Status st = ParseArgs(f, c.args);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.args[0];
    EXPECT_NE(st.message().find(c.expect), absl::string_view::npos)
        << "got: " << st.message() << " want: " << c.expect;
  }
}

TEST(FlagsTest, BadEnvironmentValueNamesTheVariable) {
  Settings s;
  Flags f = Make(s);
  ::setenv("ULTICODE_LEASE", "x", 1);
  absl::Status st = ParseArgs(f, {});
  ::unsetenv("ULTICODE_LEASE");
  EXPECT_NE(st.message().find("ULTICODE_LEASE"), absl::string_view::npos) << st;
}

TEST(FlagsTest, HelpListsEveryFlagAndMarksRequiredOnes) {
  Settings s;
  Flags f = Make(s);
  f.Require("key-file");
  ASSERT_TRUE(ParseArgs(f, {"--help"}).ok());
  EXPECT_TRUE(f.help_requested());
  const std::string usage = f.Usage();
  for (const char* name : {"--listen", "--threads", "--lease", "--notify", "--key-file",
                           "ULTICODE_LEASE", "(required)"}) {
    EXPECT_NE(usage.find(name), std::string::npos) << name;
  }
}

TEST(FlagsTest, RequiredFlagMissingIsNamed) {
  Settings s;
  Flags f = Make(s);
  f.Require("key-file");
  absl::Status st = ParseArgs(f, {"--threads=2"});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--key-file is required (or ULTICODE_KEY_FILE)"),
            absl::string_view::npos)
      << st;
}

TEST(FlagsTest, RequiredUnlessIsDecidedAfterEveryValueIsSet) {
  Settings s;
  Flags f = Make(s);
  f.Require("key-file", [&] { return s.threads == 1; });
  // --threads comes after the requirement was declared, and still counts.
  EXPECT_TRUE(ParseArgs(f, {"--threads=1"}).ok());
  Settings t;
  Flags g = Make(t);
  g.Require("key-file", [&] { return t.threads == 1; });
  EXPECT_EQ(ParseArgs(g, {"--threads=2"}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ulticode::config

// --- watched files: a change that does not load is kept out, and seen ---

namespace ulticode::config {
namespace {

// A file of one non-empty line.
struct Line {
  std::string text;
  static absl::StatusOr<Line> FromFile(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    std::getline(in, text);
    if (text.empty() || text == "broken") return absl::InvalidArgumentError("not a line");
    return Line{text};
  }
  std::string Describe() const { return text; }
};

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text << "\n";
}

FileHealth HealthOf(const std::string& path) {
  for (const FileHealth& f : FileHealthSnapshot())
    if (f.path == path) return f;
  return FileHealth{};
}

TEST(WatchedFileTest, AChangeThatDoesNotLoadKeepsTheLastGoodVersionAndIsReportedOnce) {
  char tmpl[] = "/tmp/ulticode-watched-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  Write(path, "first");
  auto file = WatchedFile<Line>::Open(path, absl::ZeroDuration());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(HealthOf(path).stale);
  EXPECT_EQ(HealthOf(path).path, path) << "reported from the first load";

  Write(path, "broken-but-longer");  // a new size: a new stamp
  Write(path, "broken");
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*file)->Current()->text, "first");
  EXPECT_TRUE(HealthOf(path).stale) << "a revocation that did not take effect must be seen";
  EXPECT_EQ(HealthOf(path).failed_reloads, 1) << "once per change, not per check";

  Write(path, "second-version");
  EXPECT_EQ((*file)->Current()->text, "second-version");
  EXPECT_FALSE(HealthOf(path).stale);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ulticode::config
