// Reports and metrics are written to a temporary file beside the target and renamed over it, so a
// reader never sees a partial file, even after a crash. The write never changes what the path is:
// a symbolic link is followed and its target replaced (the link stays); a FIFO or character device
// (/dev/null, /proc/self/fd/1 on a pipe) is written directly, where atomicity has no meaning; "-" is
// standard output. Anything else that is not a regular file (a directory, a block device, a socket)
// is refused: nothing is ever renamed onto it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sdc {

// Throws InputError naming the path when the file cannot be written; no temporary file is left.
void write_file_atomically(const std::string& path, const std::string& content, unsigned mode = 0644);

// Several files (path, content), each written as write_file_atomically writes one, all synced
// before the first is renamed into place (a journaling file system commits them in one go), then
// renamed in the order given. On an error, the files renamed before it stay, each whole, and no
// temporary file is left.
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files, unsigned mode = 0644);

}  // namespace sdc
