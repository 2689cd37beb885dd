// Sanitizer settings built into every executable of a PULSE_SANITIZE or PULSE_FUZZ build
// (the top-level CMakeLists.txt adds this file to each), so they hold however the program
// is started: by ctest, by a Python test, by hand. ASAN_OPTIONS and UBSAN_OPTIONS in the
// environment still override them.
//
// abort_on_error: a report ends the program with SIGABRT (exit 134 in a shell), never with
// the sanitizers' default exit code 1, which pulse-plan uses for "no feasible plan": a test
// that expects exit 1 cannot mistake a sanitizer report for it. LeakSanitizer's own exit
// code (23) is not one of pulse-plan's either. halt_on_error: stop at the first report
// (UBSan already does, with -fno-sanitize-recover). print_stacktrace: UBSan reports with
// the stack, as ASan's do.
extern "C" const char* __asan_default_options() {
  return "halt_on_error=1:abort_on_error=1:detect_leaks=1";
}

extern "C" const char* __ubsan_default_options() {
  return "halt_on_error=1:abort_on_error=1:print_stacktrace=1";
}
