#include "app/exit_status.h"

#include <fmt/format.h>

namespace lingbot::exit_status {

std::string help() {
  return fmt::format(
      "Exit status:\n"
      "  {}  success\n"
      "  {}  an error the user can act on (a flag, a file, a checkpoint, a value): one line on stderr names it\n"
      "  {}  inspect: the checkpoint does not fit the config (missing, mis-shaped or unexpected tensors)\n"
      "  129, 130, 143  run stopped by SIGHUP, SIGINT (Ctrl-C), SIGTERM: the finished frames' outputs are written\n",
      kSuccess, kUserError, kDoesNotFit);
}

}  // namespace lingbot::exit_status
