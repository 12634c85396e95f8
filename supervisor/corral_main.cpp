#include "supervisor/cli/commands.hpp"

int main(int argc, char** argv) { return corral::cli::main(argc, argv); }
