// Reports and metrics are written to a temporary file beside the target and renamed over it, so a
// reader never sees a partial file, even after a crash. The write never changes what the path is:
// a symbolic link is followed and its target replaced (the link stays); a FIFO or character device
// (/dev/null, /proc/self/fd/1 on a pipe) is written directly, where atomicity has no meaning; "-" is
// standard output. Anything else that is not a regular file (a directory, a block device, a socket)
// is refused: nothing is ever renamed onto it.
#pragma once

#include <string>

namespace sdc {

// Throws InputError naming the path when the file cannot be written; no temporary file is left.
void write_file_atomically(const std::string& path, const std::string& content, unsigned mode = 0644);

}  // namespace sdc
