#include "pulse/base/process.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace pulse {
namespace {

namespace fs = std::filesystem;

// The guards change the process for good (handlers, std::cout's and std::cerr's buffers), so
// each test runs them in a child: `body` returns the child's exit status. Returns the
// child's wait status.
int in_child(const std::function<int()>& body) {
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int status = body();
    std::_Exit(status);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::string temp_dir() {
  std::string name = (fs::temp_directory_path() / "pulse-process-test-XXXXXX").string();
  EXPECT_NE(::mkdtemp(name.data()), nullptr);
  return name;
}

std::size_t entries(const std::string& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(ThreadCpuSeconds, CountsWorkNotWaiting) {
  // The solvers' safety limits must not run faster on a loaded machine: a thread that
  // sleeps 200 ms has used next to no CPU time, one that spins has used what it spun.
  const double before_sleep = thread_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(thread_cpu_seconds() - before_sleep, 0.05);
  const double before_work = thread_cpu_seconds();
  volatile double sink = 0;
  for (int i = 0; i < 20'000'000; ++i) sink = sink + 1;  // tens of milliseconds
  EXPECT_GT(thread_cpu_seconds() - before_work, 0.001);
}

TEST(Temporaries, AreRegisteredUntilRenamedOrRemoved) {
  const std::string dir = temp_dir();
  const int before = temporaries::count();
  std::string a = dir + "/a.tmp-XXXXXX", b = dir + "/b.tmp-XXXXXX";
  const int fa = temporaries::create(a), fb = temporaries::create(b);
  ASSERT_GE(fa, 0);
  ASSERT_GE(fb, 0);
  ::close(fa);
  ::close(fb);
  EXPECT_EQ(temporaries::count(), before + 2);
  ASSERT_EQ(temporaries::link(a, dir + "/a.old"), 0);
  EXPECT_EQ(temporaries::count(), before + 3);
  ASSERT_EQ(temporaries::rename(a, dir + "/a.json"), 0);  // no longer a temporary
  temporaries::remove(b);
  temporaries::remove(dir + "/a.old");
  EXPECT_EQ(temporaries::count(), before);
  EXPECT_TRUE(fs::exists(dir + "/a.json"));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_EQ(entries(dir), 1u);
  fs::remove_all(dir);
}

// A signal that ends the process removes the registered temporaries, and the process still
// ends by that signal (the shell sees 128 + N).
TEST(ProcessGuards, AnEndingSignalRemovesTemporaries) {
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    const std::string dir = temp_dir();
    const int status = in_child([&] {
      // The default action, as a shell's foreground job has it (a background job of a
      // script inherits SIGINT ignored, which the guards keep: the next test).
      std::signal(signal, SIG_DFL);
      install_process_guards();
      std::string name = dir + "/.plan.json.tmp-XXXXXX";
      if (temporaries::create(name) < 0) return 10;
      std::raise(signal);
      return 11;  // not reached: the default action ends the process
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << signal << ", status " << status;
    EXPECT_EQ(WTERMSIG(status), signal);
    EXPECT_EQ(entries(dir), 0u) << "signal " << signal;
    fs::remove_all(dir);
  }
}

// A signal ignored when the process starts (nohup, a script's background job) stays
// ignored: the guards do not make it end the process.
TEST(ProcessGuards, ASignalIgnoredAtStartStaysIgnored) {
  const std::string dir = temp_dir();
  const int status = in_child([&] {
    std::signal(SIGINT, SIG_IGN);
    install_process_guards();
    std::string name = dir + "/.plan.json.tmp-XXXXXX";
    if (temporaries::create(name) < 0) return 10;
    std::raise(SIGINT);
    return 11;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 11);
  EXPECT_EQ(entries(dir), 1u);  // the child ended without the guards' cleanup
  fs::remove_all(dir);
}

// SIGPIPE is ignored: a reader that went away is a write error (EPIPE), and finish_stdout
// turns it into exit 3 with a message.
TEST(ProcessGuards, AClosedPipeIsAWriteError) {
  const int status = in_child([] {
    int fds[2];
    if (::pipe(fds) != 0) return 10;
    ::close(fds[0]);
    ::dup2(fds[1], 1);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 2);
    install_process_guards();
    if (write_to_stdout("a plan")) return 11;
    if (errno != EPIPE) return 12;
    return finish_stdout(0);
  });
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

// Output through std::cout that cannot be written (/dev/full) turns a success into exit 3;
// a command that failed already keeps its status.
TEST(ProcessGuards, FinishStdoutReportsAFailedWrite) {
  for (const auto& [given, expected] : {std::pair{0, 3}, {1, 3}, {4, 3}, {2, 2}, {3, 3}}) {
    const int status = in_child([given = given] {
      const int full = ::open("/dev/full", O_WRONLY);
      const int null = ::open("/dev/null", O_WRONLY);
      if (full < 0 || null < 0) return 10;
      ::dup2(full, 1);
      ::dup2(null, 2);
      install_process_guards();
      std::cout << "pulse-plan 1.0\n";
      return finish_stdout(given);
    });
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), expected) << "status " << given;
  }
  const int fine = in_child([] {
    ::dup2(::open("/dev/null", O_WRONLY), 1);
    install_process_guards();
    std::cout << "fine\n";
    return finish_stdout(0);
  });
  EXPECT_EQ(WEXITSTATUS(fine), 0);
}

// What reaches stderr is printable: a name's ESC cannot drive the terminal; line breaks stay.
TEST(ProcessGuards, StderrIsPrintable) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int status = in_child([&] {
    ::close(fds[0]);
    ::dup2(fds[1], 2);
    install_process_guards();
    std::cerr << "pulse-plan: layer \"a\x1b]0;x\x07\" is bad\n" << '\x7f' << "\n";
    terminal_stderr() << "\r\033[K";
    return 0;
  });
  ::close(fds[1]);
  std::string got;
  char buffer[256];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) got.append(buffer, n);
  ::close(fds[0]);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(got, "pulse-plan: layer \"a\\x1b]0;x\\x07\" is bad\n\\x7f\n\r\033[K");
}

}  // namespace
}  // namespace pulse
