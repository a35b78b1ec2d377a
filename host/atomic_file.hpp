// Reports and metrics are written to a temporary file in the target's directory and renamed over
// it, so a reader never sees a partial file, even after a crash.
#pragma once

#include <string>

namespace sdc {

// Throws InputError naming the path when the file cannot be written.
void write_file_atomically(const std::string& path, const std::string& content, unsigned mode = 0644);

}  // namespace sdc
