// What the process owes its surroundings however it ends: no temporary file left behind by a
// signal, every failed write to stdout reported (exit 3, as every write error is), and no
// byte from a profile or a path on stderr that a terminal would obey. main() installs the
// guards first and passes its exit status through finish_stdout last.
#pragma once

#include <signal.h>

#include <ostream>
#include <string>
#include <string_view>

namespace pulse {

/// Installs the process's guards, once, at the start of main():
///   - SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGALRM, SIGVTALRM, SIGPROF, SIGUSR1 and SIGUSR2
///     remove every registered temporary (below) and then end the process by the same
///     signal, so that the shell sees what it sent;
///   - SIGPIPE and SIGXFSZ are ignored: a reader that went away or the file-size limit
///     (ulimit -f) reaches the writer as EPIPE or EFBIG, a write error like a full disk,
///     reported and cleaned up as one;
///   - std::cout writes to descriptor 1 through a buffer that remembers the first error
///     (finish_stdout reports it);
///   - std::cerr writes printable() text (line breaks kept) to descriptor 2.
/// Library code and tests that never call it keep the standard streams as they are.
void install_process_guards();

/// Flushes std::cout and returns the exit status main() should return: `status`, or 3 with
/// "pulse-plan: stdout: write failed: REASON" on stderr when a write to stdout failed
/// (a full disk, a closed pipe, a closed descriptor) and `status` was 0, 1 or 4, whose
/// output was that report. A status of 2 or 3 has said what went wrong already.
int finish_stdout(int status);

/// Writes `text` to stdout (the same stream as std::cout, in order with it) and flushes;
/// false, with errno set, when any write to stdout so far has failed.
bool write_to_stdout(std::string_view text);

/// Hands the memory the process has freed back to the system, where the C library can
/// (glibc's malloc_trim; elsewhere nothing). A job's phases that free much before the next
/// allocates much call it between them: the planner's millions of small allocations leave
/// freed pages scattered through the heap, which the allocator keeps, and the plan's text
/// and its read-back come on top (at pp 512 over 2048 layers, 1.7 GB kept, 0.9 GB added).
void release_free_memory();

/// Has the C library's allocator serve every allocation from its heap and keep what is
/// freed there for the next (glibc's mallopt: M_MMAP_MAX 0, M_TRIM_THRESHOLD at its largest;
/// elsewhere nothing). main() calls it once, first. The planner allocates and frees tables of
/// tens to hundreds of MB over and over (each replay's timeline and engine, each bound's
/// release and tail tables); glibc maps each one of 32 MB or more afresh, the kernel faults it
/// in page by page and unmaps it on free. At pp 512 over 2048 layers that was 745 thousand
/// page faults and 1.5 s of system time, against 292 thousand and 0.9 s kept in the heap,
/// at the same peak; release_free_memory still hands the freed pages back where a job asks.
void keep_freed_memory_for_reuse();

/// stderr without printable()'s escaping, for the few bytes pulse-plan itself means for the
/// terminal (the progress line's carriage return and erase-line).
std::ostream& terminal_stderr();

/// CPU seconds the calling thread has run (clock_gettime(CLOCK_THREAD_CPUTIME_ID)): what the
/// solvers' safety limits measure, so that a loaded machine, which stretches the wall clock,
/// does not make them fire sooner in the work and so change a plan.
double thread_cpu_seconds();

/// Holds the ending signals (above) off for its lifetime; one that arrives meanwhile is
/// handled when it ends. For a change of several files that must not stop half-way.
class HeldSignals {
 public:
  HeldSignals();
  ~HeldSignals();
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t previous_;
};

/// Temporary files that a signal must not leave behind. Each call holds the handled signals
/// off while it changes the file system and the list together, so that a signal finds the
/// list as the directory is. Registered names are removed by the handlers (unlink(2) is safe
/// there); at most kMaxTemporaries are registered at a time, a further one is made but not
/// registered.
namespace temporaries {

inline constexpr int kMaxTemporaries = 32;

/// mkstemp(3) on `name`, whose last six characters are "XXXXXX" (replaced by the name
/// made); the new file is registered. Returns the descriptor, or -1 with errno set.
int create(std::string& name);
/// link(2): a new name `to` for the file `from`, registered. 0, or -1 with errno set.
int link(const std::string& from, const std::string& to);
/// rename(2) of the registered `name` onto `target`, which is not registered: the file is
/// no longer a temporary. 0, or -1 with errno set (then `name` stays registered).
int rename(const std::string& name, const std::string& target);
/// unlink(2) of the registered `name`, which is forgotten.
void remove(const std::string& name);
/// How many names are registered (for tests).
int count();

}  // namespace temporaries

}  // namespace pulse
