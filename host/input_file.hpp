// Every reader of an input file opens it here, so that each failure reads the same way:
//   "<what> <path>: cannot read the file: <why>"
// where `what` names the flag or field that gave the path ("--golden", "event log") and `why` is
// the system's reason (No such file or directory, Is a directory, Input/output error, ...). A FIFO
// or character device (/dev/stdin) is read as the stream it is, once; a block device or socket is
// refused. The write side is host/atomic_file.
#pragma once

#include <fstream>
#include <istream>
#include <string>

namespace sdc {

// The file, open for reading in binary; throws InputError in the wording above.
std::ifstream open_input(const std::string& path, const std::string& what);

// After reading `in` (opened by open_input) as far as the reader goes: throws InputError in the
// wording above when a read failed, which a stream shows as an early end of file.
void check_read(const std::istream& in, const std::string& path, const std::string& what);

// What is left of `in` (opened by open_input), then check_read.
std::string read_rest(std::istream& in, const std::string& path, const std::string& what);

// The whole file.
std::string read_input(const std::string& path, const std::string& what);

}  // namespace sdc
