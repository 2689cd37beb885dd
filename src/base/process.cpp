#include "pulse/base/process.hpp"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <streambuf>

#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "pulse/base/text.hpp"

namespace pulse {

namespace {

// --- Temporaries a signal removes -----------------------------------------------------------

// A fixed table, because the handler may only read memory and call async-signal-safe
// functions: no allocation, no locks. Changed only with the handled signals held off.
struct Slot {
  volatile std::sig_atomic_t used;
  char path[PATH_MAX + 1];
};
Slot g_slots[temporaries::kMaxTemporaries];

constexpr int kEndingSignals[] = {SIGHUP,    SIGINT,  SIGQUIT, SIGTERM, SIGALRM,
                                  SIGVTALRM, SIGPROF, SIGUSR1, SIGUSR2};

sigset_t ending_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kEndingSignals) sigaddset(&set, s);
  return set;
}

void add(const std::string& path) {
  if (path.size() > PATH_MAX) return;
  for (Slot& s : g_slots) {
    if (s.used) continue;
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.used = 1;
    return;
  }
}

void forget(const std::string& path) {
  for (Slot& s : g_slots) {
    if (s.used && path == s.path) {
      s.used = 0;
      return;
    }
  }
}

extern "C" void remove_temporaries_and_end(int signal) {
  for (Slot& s : g_slots) {
    if (s.used) ::unlink(s.path);
  }
  // The default action, raised again: it is delivered when this handler returns (the
  // signal is blocked while it runs), and the process ends as the sender meant it to.
  struct sigaction fallback = {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  std::raise(signal);
}

void install_signal_handlers() {
  struct sigaction handler = {};
  handler.sa_handler = remove_temporaries_and_end;
  handler.sa_mask = ending_signals();
  for (int s : kEndingSignals) {
    struct sigaction previous = {};
    // A signal ignored when the process started (nohup, a background job) stays ignored.
    if (sigaction(s, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
    sigaction(s, &handler, nullptr);
  }
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
  sigaction(SIGXFSZ, &ignore, nullptr);
}

// --- The standard streams --------------------------------------------------------------------

// Writes all of `text` to `fd`; the errno of a failed write, or 0.
int write_fd(int fd, const char* text, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, text, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    text += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

// Descriptor 1 behind a buffer. The first failed write is remembered and what follows it is
// dropped: the output is broken either way, and finish_stdout says so once.
class StdoutSink : public std::streambuf {
 public:
  StdoutSink() { setp(buffer_, buffer_ + sizeof buffer_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    drain();
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    *pptr() = traits_type::to_char_type(c);
    pbump(1);
    return c;
  }
  std::streamsize xsputn(const char* text, std::streamsize n) override {
    if (n <= epptr() - pptr()) {
      std::memcpy(pptr(), text, static_cast<std::size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    drain();
    if (error_ == 0) error_ = write_fd(1, text, static_cast<std::size_t>(n));
    return n;
  }
  int sync() override {
    drain();
    return error_ == 0 ? 0 : -1;
  }

 private:
  void drain() {
    if (error_ == 0) error_ = write_fd(1, pbase(), static_cast<std::size_t>(pptr() - pbase()));
    setp(buffer_, buffer_ + sizeof buffer_);
  }

  char buffer_[1 << 16];
  int error_ = 0;
};

// Descriptor 2, unbuffered as stderr is; with `escape`, every piece as printable() text.
class StderrSink : public std::streambuf {
 public:
  explicit StderrSink(bool escape) : escape_(escape) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    emit(std::string_view(&ch, 1));
    return c;
  }
  std::streamsize xsputn(const char* text, std::streamsize n) override {
    emit(std::string_view(text, static_cast<std::size_t>(n)));
    return n;
  }

 private:
  // A message that cannot be written has nowhere else to go.
  void emit(std::string_view text) {
    const std::string shown = escape_ ? printable(text, LineBreaks::keep) : std::string(text);
    write_fd(2, shown.data(), shown.size());
  }

  bool escape_;
};

// Allocated once and never freed: std::cout and std::cerr are flushed after static
// destructors have run, so their buffers must outlive them (still reachable, not leaked).
StdoutSink* g_stdout = nullptr;
std::ostream* g_terminal = nullptr;

}  // namespace

// pulse-plan changes files from one thread, so the process mask is the thread's.
HeldSignals::HeldSignals() {
  const sigset_t set = ending_signals();
  sigprocmask(SIG_BLOCK, &set, &previous_);
}

HeldSignals::~HeldSignals() {
  sigprocmask(SIG_SETMASK, &previous_, nullptr);
}

void install_process_guards() {
  if (g_stdout) return;
  install_signal_handlers();
  std::cout.flush();
  g_stdout = new StdoutSink();
  std::cout.rdbuf(g_stdout);
  std::cerr.rdbuf(new StderrSink(true));
  g_terminal = new std::ostream(new StderrSink(false));
}

bool write_to_stdout(std::string_view text) {
  if (!g_stdout) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0 && !std::ferror(stdout);
  }
  std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cout.flush();
  errno = g_stdout->error();
  return g_stdout->error() == 0;
}

int finish_stdout(int status) {
  std::cout.flush();
  int error = 0;
  if (g_stdout) {
    error = g_stdout->error();
  } else if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    error = errno != 0 ? errno : EIO;
  }
  if (error == 0 || status == 2 || status == 3) return status;
  std::cerr << "pulse-plan: stdout: write failed: " << std::strerror(error) << "\n";
  return 3;
}

std::ostream& terminal_stderr() {
  return g_terminal ? *g_terminal : std::cerr;
}

namespace temporaries {

int create(std::string& name) {
  HeldSignals held;
  const int fd = ::mkstemp(name.data());
  if (fd >= 0) add(name);
  return fd;
}

int link(const std::string& from, const std::string& to) {
  HeldSignals held;
  const int r = ::link(from.c_str(), to.c_str());
  if (r == 0) add(to);
  return r;
}

int rename(const std::string& name, const std::string& target) {
  HeldSignals held;
  const int r = std::rename(name.c_str(), target.c_str());
  if (r == 0) forget(name);
  return r;
}

void remove(const std::string& name) {
  HeldSignals held;
  ::unlink(name.c_str());
  forget(name);
}

int count() {
  int n = 0;
  for (const Slot& s : g_slots) n += s.used ? 1 : 0;
  return n;
}

}  // namespace temporaries

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void keep_freed_memory_for_reuse() {
#ifdef __GLIBC__
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

void release_free_memory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

}  // namespace pulse
