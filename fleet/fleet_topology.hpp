// Where each node sits (docs/consensus.md, "Topology"): node -> groups such as rack=R1, switch=S3 or
// pdu=P2, read from sdcprobe's own line format or from Slurm's topology.conf, so that fleet sdc can
// test whole racks, switches and power domains as it tests nodes.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sdc {

// host -> its groups, each "kind=name", sorted and distinct.
using Topology = std::map<std::string, std::vector<std::string>>;

// At most this many hosts from one hostlist expression (a typo such as n[1-99999999] is refused).
inline constexpr size_t kMaxHostlistHosts = 100000;

// Slurm's hostlist expressions: "n[01-08,10],gpu7" -> n01 ... n08, n10, gpu7 (zero padding kept,
// several brackets in one name multiply). Throws std::invalid_argument saying what is wrong.
std::vector<std::string> expand_hostlist(std::string_view expression);

// Lines of either form, '#' to the end of a line a comment:
//   node01 rack=R1 switch=S3 pdu=P2
//   SwitchName=S3 Nodes=node[01-08]        (topology.conf: the group switch=S3)
//   SwitchName=S9 Switches=S[3-4]          (switch=S9: every node below S3 and S4)
// Throws InputError "NAME: line N: ..." on anything else.
Topology parse_topology(const std::string& name, std::string_view text);
Topology load_topology(const std::string& path);

}  // namespace sdc
