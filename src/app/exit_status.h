// What lingbot-map's exit status means: the table that ends --help (and the
// README's), kept beside the values the commands return.
#pragma once

#include <string>

namespace lingbot::exit_status {

inline constexpr int kSuccess = 0;
inline constexpr int kUserError = 1;     // a bad flag, file, checkpoint or value: one line on stderr says which
inline constexpr int kDoesNotFit = 2;    // inspect: the checkpoint and the config disagree

// The "Exit status:" section of --help.
std::string help();

}  // namespace lingbot::exit_status
