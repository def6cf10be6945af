// The temporary files a run is writing, kept where a signal handler can
// reach them: a second Ctrl-C exits at once and must still remove them, and a
// handler may only call async-signal-safe functions (unlink, not free or
// std::string). Paths live in fixed static slots.
#pragma once

#include <string>

namespace lingbot::io {

// Records `path` (throws past the fixed number of slots); unregister when the
// file is renamed into place or removed. Safe from several threads.
void register_temporary(const std::string& path);
void unregister_temporary(const std::string& path);

// Unlinks every registered path; async-signal-safe.
void remove_registered_temporaries_signal_safe();

}  // namespace lingbot::io
