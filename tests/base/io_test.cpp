#include "pulse/base/io.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"

namespace pulse {
namespace {

namespace fs = std::filesystem;

class Io : public test::TempDirTest {
 protected:
  void put(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
  std::string usage(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
    const Status s = check_output_paths("cmd", inputs, outputs);
    EXPECT_FALSE(s.ok());
    if (s.ok()) return "";
    EXPECT_EQ(s.error().kind, ErrorKind::usage);
    return s.error().message;
  }
};

TEST_F(Io, OutputsAppearTogether) {
  put("a.json", "old a");
  ASSERT_TRUE(write_outputs({{path("a.json"), "new a"}, {path("b.json"), "new b"}}).ok());
  EXPECT_EQ(get("a.json"), "new a");
  EXPECT_EQ(get("b.json"), "new b");
  EXPECT_EQ(entries(), (std::vector<std::string>{"a.json", "b.json"}));
}

TEST_F(Io, ARenameThatFailsUndoesTheOnesBefore) {
  // b's target is a directory: every temporary is written, then a and new.json are renamed
  // into place and b's rename fails. a is put back as it was, new.json removed, and c,
  // never renamed, has its temporary removed.
  put("a.json", "old a");
  fs::create_directory(path("b"));
  const Status s = write_outputs(
      {{path("a.json"), "new a"}, {path("new.json"), "new"}, {path("b"), "b"}, {path("c"), "c"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::internal);
  EXPECT_NE(s.error().message.find("cannot rename the temporary file into place"),
            std::string::npos)
      << s.error().message;
  EXPECT_EQ(get("a.json"), "old a");
  // What did not exist before does not exist after; no temporary or backup is left.
  EXPECT_EQ(entries(), (std::vector<std::string>{"a.json", "b"}));
}

TEST_F(Io, AWriteThatFailsRenamesNothing) {
  // /dev/full is written in place (a special file) after the temporaries and fails with
  // ENOSPC: the file that was there stays as it was.
  if (!fs::is_character_file("/dev/full")) GTEST_SKIP() << "no /dev/full device";
  put("plan.json", "old plan");
  const Status s = write_outputs({{path("plan.json"), "new plan"}, {"/dev/full", "trace"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "/dev/full: write failed: No space left on device");
  EXPECT_EQ(get("plan.json"), "old plan");
  EXPECT_EQ(entries(), (std::vector<std::string>{"plan.json"}));
}

// A producer hands its text over in pieces: the file is their concatenation, in order.
TEST_F(Io, AProducedOutputIsItsPiecesInOrder) {
  put("plan.json", "old plan");
  const Output::Producer three = [](const TextSink& sink) -> Status {
    for (const char* piece : {"{\"a\": ", "1", "}\n"}) {
      if (!sink(piece)) return internal_error("the sink refused");
    }
    return Ok{};
  };
  ASSERT_TRUE(write_outputs({{path("plan.json"), three}, {path("t.json"), "trace"}}).ok());
  EXPECT_EQ(get("plan.json"), "{\"a\": 1}\n");
  EXPECT_EQ(get("t.json"), "trace");
  EXPECT_EQ(entries(), (std::vector<std::string>{"plan.json", "t.json"}));
}

// A producer that fails half way (a number not finite, found while streaming) replaces
// nothing and leaves no temporary: its own error is the answer.
TEST_F(Io, AProducerThatFailsReplacesNothing) {
  put("plan.json", "old plan");
  const Output::Producer half = [](const TextSink& sink) -> Status {
    if (!sink("{\"half\": ")) return internal_error("the sink refused");
    return internal_error("the plan made has nan at $.x");
  };
  const Status s = write_outputs({{path("t.json"), "trace"}, {path("plan.json"), half}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::internal);
  EXPECT_EQ(s.error().message, "the plan made has nan at $.x");
  EXPECT_EQ(get("plan.json"), "old plan");
  EXPECT_EQ(entries(), (std::vector<std::string>{"plan.json"}));
}

// Where the sink refuses a piece (the device is full), the write's error is reported, not
// whatever the producer makes of the refusal, and the producer is handed nothing more.
TEST_F(Io, AProducedWriteThatFailsSaysWhy) {
  if (!fs::is_character_file("/dev/full")) GTEST_SKIP() << "no /dev/full device";
  int refused = 0;
  const Output::Producer pieces = [&](const TextSink& sink) -> Status {
    for (int i = 0; i < 3; ++i) refused += sink("piece") ? 0 : 1;
    return internal_error("the producer's own words");
  };
  const Status s = write_outputs({{"/dev/full", pieces}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "/dev/full: write failed: No space left on device");
  EXPECT_EQ(refused, 3);
}

TEST_F(Io, SpecialFilesAreWrittenInPlaceNotReplaced) {
  // /dev/zero takes any write; a rename over it would have put a regular file there.
  if (!fs::is_character_file("/dev/zero")) GTEST_SKIP() << "no /dev/zero device";
  ASSERT_TRUE(write_outputs({{"/dev/zero", "nothing"}, {path("a.json"), "a"}}).ok());
  EXPECT_TRUE(fs::is_character_file("/dev/zero"));
  EXPECT_EQ(get("a.json"), "a");
}

TEST_F(Io, AnOutputThatIsAnInputIsRefusedHoweverSpelled) {
  put("m.json", "{}");
  fs::create_directory(path("sub"));
  fs::create_symlink(path("m.json"), path("link.json"));
  fs::create_hard_link(path("m.json"), path("hard.json"));
  const std::vector<NamedPath> in = {{"--model", path("m.json")}};
  for (const std::string& spelling :
       {path("m.json"), (dir_ / "." / "m.json").string(), path("sub/../m.json"), path("link.json"),
        path("hard.json")}) {
    EXPECT_EQ(usage(in, {{"-o", spelling}}),
              "cmd: -o " + spelling + " is the same file as --model " + path("m.json") +
                  ": writing it would destroy an input; give another name");
  }
  EXPECT_EQ(get("m.json"), "{}");
  // A relative spelling against an absolute one.
  const fs::path here = fs::current_path();
  fs::current_path(dir_);
  EXPECT_EQ(usage(in, {{"-o", "./m.json"}}),
            "cmd: -o ./m.json is the same file as --model " + path("m.json") +
                ": writing it would destroy an input; give another name");
  fs::current_path(here);
}

TEST_F(Io, TwoOutputsThatAreOneFileAreRefused) {
  // Neither exists yet: the paths are compared once resolved.
  EXPECT_EQ(usage({}, {{"-o", path("a.json")}, {"--trace", path("sub/../a.json")}}),
            "cmd: -o " + path("a.json") + " and --trace " + path("sub/../a.json") +
                " name the same file; give each output its own name");
  const fs::path here = fs::current_path();
  fs::current_path(dir_);
  EXPECT_EQ(usage({}, {{"-o", "a.json"}, {"--trace", "./a.json"}}),
            "cmd: -o a.json and --trace ./a.json name the same file; give each output its own "
            "name");
  fs::current_path(here);
  EXPECT_EQ(usage({}, {{"", "-"}, {"--trace", "-"}}),
            "cmd: the output without -o and --trace - both write to stdout; give one of them a "
            "file name");
}

TEST_F(Io, OutputsThatCannotBeWrittenAreRefused) {
  fs::create_directory(path("sub"));
  put("file", "x");
  EXPECT_EQ(usage({}, {{"-o", path("sub")}}),
            "cmd: -o " + path("sub") + " is a directory; give a file name");
  EXPECT_EQ(
      usage({}, {{"-o", path("missing/x.json")}}),
      "cmd: -o " + path("missing/x.json") + ": directory " + path("missing") + " does not exist");
  EXPECT_EQ(usage({}, {{"-o", path("file/x.json")}}),
            "cmd: -o " + path("file/x.json") + ": " + path("file") + " is not a directory");
  EXPECT_EQ(usage({}, {{"--trace", ""}}), "cmd: --trace needs a file name");
  // Names that are not UTF-8 are bytes like any other.
  EXPECT_EQ(usage({}, {{"-o", path("\xff/x.json")}}),
            "cmd: -o " + path("\xff/x.json") + ": directory " + path("\xff") + " does not exist");
  EXPECT_TRUE(check_output_paths("cmd", {}, {{"-o", path("\xff.json")}}).ok());
  if (::geteuid() != 0) {  // root may write anywhere
    fs::permissions(path("sub"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_EQ(usage({}, {{"-o", path("sub/x.json")}}), "cmd: -o " + path("sub/x.json") +
                                                           ": cannot create files in directory " +
                                                           path("sub") + ": Permission denied");
    fs::permissions(path("sub"), fs::perms::owner_all);
  }
}

TEST_F(Io, ASpecialFileNeedsNoWritableDirectory) {
  // Written in place: /dev need not take a temporary (it does not, for anyone but root).
  if (!fs::is_character_file("/dev/zero")) GTEST_SKIP() << "no /dev/zero device";
  EXPECT_TRUE(is_special_file("/dev/zero"));
  EXPECT_FALSE(is_special_file(path("missing.json")));
  EXPECT_TRUE(check_output_paths("cmd", {}, {{"-o", "/dev/zero"}}).ok());
}

TEST_F(Io, WritableOutputsAndStdoutPass) {
  put("old.json", "x");
  EXPECT_TRUE(
      check_output_paths("cmd", {{"--model", path("m.json")}},
                         {{"-o", path("old.json")}, {"--trace", path("t.json")}, {"--stages", "-"}})
          .ok());
}

// -o through a symbolic link writes the file at its end, atomically; the link stays a link.
// A dangling link creates its target, as the shell's > does.
TEST_F(Io, ALinkIsWrittenThroughNotReplaced) {
  fs::create_directory(path("real"));
  put("real/plan.json", "old");
  fs::create_symlink("real/plan.json", path("link.json"));
  fs::create_symlink("link.json", path("link2.json"));  // a chain
  fs::create_symlink("real/new.json", path("dangling.json"));
  ASSERT_TRUE(check_output_paths("cmd", {}, {{"-o", path("link2.json")}}).ok());
  ASSERT_TRUE(write_outputs({{path("link2.json"), "new"}, {path("dangling.json"), "made"}}).ok());
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_TRUE(fs::is_symlink(path("link2.json")));
  EXPECT_TRUE(fs::is_symlink(path("dangling.json")));
  EXPECT_EQ(get("real/plan.json"), "new");
  EXPECT_EQ(get("real/new.json"), "made");
  EXPECT_EQ(entries(),
            (std::vector<std::string>{"dangling.json", "link.json", "link2.json", "real"}));
}

TEST_F(Io, ALoopOfLinksIsRefused) {
  fs::create_symlink("b.json", path("a.json"));
  fs::create_symlink("a.json", path("b.json"));
  EXPECT_EQ(usage({}, {{"-o", path("a.json")}}),
            "cmd: -o " + path("a.json") + ": more than 40 symbolic links in a row (a loop?)");
}

// The mode of the file replaced is kept (a plan its owner made private stays private).
TEST_F(Io, AReplacedFileKeepsItsMode) {
  put("plan.json", "old");
  fs::permissions(path("plan.json"), fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(write_outputs({{path("plan.json"), "new"}}).ok());
  EXPECT_EQ(fs::status(path("plan.json")).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(get("plan.json"), "new");
}

// The process's own descriptors are written directly, whatever file the shell opened for
// them: /dev/stdout is never replaced (as root, a rename over it used to put a regular file
// in /dev), and two outputs on one descriptor are refused.
TEST_F(Io, DescriptorsAreStreams) {
  for (const char* p :
       {"/dev/stdout", "/dev/stderr", "/dev/fd/1", "/proc/self/fd/2", "/dev/./stdout"}) {
    EXPECT_TRUE(is_special_file(p)) << p;
  }
  EXPECT_FALSE(is_special_file(path("plan.json")));
  EXPECT_TRUE(check_output_paths("cmd", {}, {{"-o", "/dev/stderr"}}).ok());
  EXPECT_EQ(usage({}, {{"-o", "/dev/stdout"}, {"--trace", "-"}}),
            "cmd: -o /dev/stdout and --trace - both write to stdout; give one of them a file "
            "name");
  EXPECT_EQ(usage({}, {{"-o", "/dev/fd/2"}, {"--trace", "/dev/stderr"}}),
            "cmd: -o /dev/fd/2 and --trace /dev/stderr both write to stderr; give one of them a "
            "file name");
  EXPECT_EQ(usage({}, {{"-o", "/dev/stdin"}}),
            "cmd: -o /dev/stdin is the standard input; give a file name or - for stdout");
  // A descriptor beyond stdout and stderr must be open for writing.
  EXPECT_EQ(usage({}, {{"-o", "/dev/fd/977"}}), "cmd: -o /dev/fd/977: descriptor 977 is not open");
  const int reading = ::open("/dev/null", O_RDONLY);
  const std::string name = "/proc/self/fd/" + std::to_string(reading);
  EXPECT_EQ(usage({}, {{"-o", name}}), "cmd: -o " + name + ": descriptor " +
                                           std::to_string(reading) + " is open for reading only");
  ::close(reading);
  // A descriptor that has an input open (stdout appended onto the model: >> m.json).
  put("m.json", "{}");
  const int appending = ::open(path("m.json").c_str(), O_WRONLY | O_APPEND);
  const std::string fd = "/dev/fd/" + std::to_string(appending);
  EXPECT_EQ(usage({{"--model", path("m.json")}}, {{"-o", fd}}),
            "cmd: -o " + fd + " is the same file as --model " + path("m.json") +
                ": writing it would destroy an input; give another name");
  ::close(appending);
  // A link in the user's directory to /dev/stdout is stdout too.
  fs::create_symlink("/dev/stdout", path("out"));
  EXPECT_TRUE(is_special_file(path("out")));
  EXPECT_TRUE(fs::is_symlink("/dev/stdout") || !fs::exists("/dev/stdout"));
}

// A named pipe is written in place (a reader gets the bytes); a socket file is refused.
TEST_F(Io, PipesAreWrittenInPlaceSocketsRefused) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const int reader = ::open(path("fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(check_output_paths("cmd", {}, {{"-o", path("fifo")}}).ok());
  ASSERT_TRUE(write_outputs({{path("fifo"), "through the pipe"}, {path("a.json"), "a"}}).ok());
  char buffer[64] = {};
  EXPECT_EQ(::read(reader, buffer, sizeof buffer), 16);
  EXPECT_EQ(std::string(buffer), "through the pipe");
  ::close(reader);
  EXPECT_TRUE(fs::is_fifo(path("fifo")));

  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string name = path("sock");
  if (name.size() >= sizeof address.sun_path) GTEST_SKIP() << "temporary path too long";
  std::copy(name.begin(), name.end(), address.sun_path);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(usage({}, {{"-o", name}}), "cmd: -o " + name + " is a socket; give a file name");
  ::close(sock);
}

// Whether a temporary can be made is tried, not guessed from permission bits: /proc takes
// no file even from root, and that is the user's choice of place (exit 2), found before the
// work.
TEST_F(Io, ADirectoryThatTakesNoFileIsRefusedBeforeTheWork) {
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc";
  const std::string message = usage({}, {{"-o", "/proc/pulse-out.json"}});
  EXPECT_EQ(
      message.rfind("cmd: -o /proc/pulse-out.json: cannot create files in directory /proc: ", 0),
      0u)
      << message;
  EXPECT_FALSE(fs::exists("/proc/pulse-out.json"));
}

}  // namespace
}  // namespace pulse
