// pulse-plan: a planning compiler for pipeline-parallel training of diffusion models.
// The binary is a thin shell over the library; see commands.cpp for the command table.
#include <exception>
#include <iostream>

#include "commands.hpp"

int main(int argc, char** argv) {
  // Errors cross the library as values (Result); an exception reaching this point is a bug
  // (a broken invariant, an allocation failure) and is reported as an internal error. This
  // is the program's one catch outside the JSON and option parsers; anything else thrown
  // (not a std::exception) is caught too, so no exception ends the process with a signal.
  try {
    return pulse::cli::run(argc, argv);
  } catch (const std::exception& e) {
    return pulse::cli::report(pulse::internal_error(std::string("internal error: ") + e.what()));
  } catch (...) {
    return pulse::cli::report(pulse::internal_error("internal error: an unknown exception"));
  }
}
