// The work behind `sdcprobe fleet goodput`, callable without the CLI (the tests call it).
#pragma once

#include <ostream>
#include <string>

#include "goodput/cluster/cluster_ledger.hpp"

namespace sdc::goodput::cluster {

struct FleetGoodputOptions {
  ClusterInputs inputs;
  std::string since, until;  // as given: a duration before the end ("7d"), or RFC 3339
  std::string by = "user";
  size_t top = 5;
  std::string json_path, markdown_path, svg_path, prom_path;  // empty: not written
};

// Prints the text report on `out`, warnings on `err`; writes the files atomically. Throws InputError
// on bad input.
int fleet_goodput_command(FleetGoodputOptions options, std::ostream& out, std::ostream& err);

}  // namespace sdc::goodput::cluster
