// `sdcprobe fleet import`: what nodes already wrote, their JSON reports and history databases, into
// the fleet store (docs/fleet.md#import). Each input is read by the fleet reader first, so a file is
// imported exactly when `fleet sdc` would read it, and refused with the same error naming the file
// and the field. A history is opened read-only, as `fleet sdc` opens it. Importing the same input
// again writes the same files under the same names: nothing is counted twice.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fleet/store_writer.hpp"

namespace sdc {

// The store files of one JSON report's text; `name` is how errors call it.
std::vector<StoreFile> report_store_files(const std::string& name, std::string_view text);

struct StoreImport {
  uint64_t reports = 0, histories = 0;
  uint64_t results = 0;  // rows of the results table written
  uint64_t files = 0;    // files published
};

// Imports every file of fleet_input_files(paths) into the store at `dir` (prepared first), one input
// at a time: the inputs before a bad one are imported, and importing them again changes nothing.
StoreImport import_into_store(const std::vector<std::string>& paths, const std::string& dir);

}  // namespace sdc
