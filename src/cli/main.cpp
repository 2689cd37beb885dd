// pulse-plan: a planning compiler for pipeline-parallel training of diffusion models.
// The binary is a thin shell over the library; see commands.cpp for the command table.
#include "commands.hpp"

int main(int argc, char** argv) {
  return pulse::cli::run(argc, argv);
}
