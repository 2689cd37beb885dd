// pulse-plan: a planning compiler for pipeline-parallel training of diffusion models.
// The binary is a thin shell over the library; see commands.cpp for the command table.
#include <exception>
#include <iostream>

#include "commands.hpp"
#include "pulse/base/process.hpp"

int main(int argc, char** argv) {
  pulse::keep_freed_memory_for_reuse();  // large tables reused, not mapped afresh each time
  pulse::install_process_guards();       // signals clean up, stdout errors count, stderr escaped
  // Errors cross the library as values (Result); an exception reaching this point is a bug
  // (a broken invariant, an allocation failure) and is reported as an internal error. This
  // is the program's one catch outside the JSON and option parsers; anything else thrown
  // (not a std::exception) is caught too, so no exception ends the process with a signal.
  try {
    return pulse::finish_stdout(pulse::cli::run(argc, argv));
  } catch (const std::exception& e) {
    return pulse::cli::report(pulse::internal_error(std::string("internal error: ") + e.what()));
  } catch (...) {
    return pulse::cli::report(pulse::internal_error("internal error: an unknown exception"));
  }
}
