// PyTorch's collective flight recorder: the per-rank dumps that torch writes (a pickled dict, or
// its JSON form) read into what the hang attribution needs (goodput/hang_attribution.hpp).
// docs/goodput.md, "Hangs", says which torch versions and fields are read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sdc::goodput {

// One collective a rank enqueued (point-to-point operations are left out: they have no collective
// sequence number).
struct FrEntry {
  std::string group;       // the process group's name, the same on every rank ("0" is the world)
  std::string group_desc;  // "default_pg", "mesh_tp", ...
  int64_t seq = 0;         // collective_seq_id: the n-th collective of this group on this rank
  std::string op;          // profiling_name without the backend ("all_reduce")
  // The tensors' shapes and types, as JSON text, compared between ranks.
  std::string input_sizes, output_sizes, input_dtypes, output_dtypes;
  int64_t created_ns = 0;  // time_created_ns; 0: not recorded
  int64_t timeout_ms = 0;
};

struct FrDump {
  std::string path;
  int rank = -1;
  std::string version;           // the dump format's, "2.10"
  std::string comm_lib_version;  // NCCL's version; "" under gloo
  std::vector<FrEntry> entries;
  // The newest collective this rank enqueued in each group it took part in (pg_status, which keeps
  // counting after the ring buffer dropped old entries, and the entries).
  std::map<std::string, int64_t> last_enqueued;
  // Groups whose members pg_config names under the group's own name (NCCL writes them so; gloo
  // writes one entry under "" that is not trusted).
  std::map<std::string, std::vector<int>> config_ranks;
  int largest_rank_named = -1;  // the largest rank in any pg_config entry, gloo's "" included
};

// A dump's parsed content (from read_pickle or JSON) checked and read; `path` and `rank` are the
// file's. Throws InputError "PATH: field: why".
FrDump parse_fr_dump(const nlohmann::json& dump, const std::string& path, int rank);

// Every dump in `dir`: files named PREFIX<rank>, optionally with .json, .pkl or .pickle after the
// rank, with one prefix for the folder (torch's default is nccl_trace_rank_). Other files (event
// logs, expected answers) are skipped. Throws InputError naming the folder or the file: none found,
// two files of one rank, a file that is neither a pickle nor JSON, dumps of different versions or
// jobs.
std::vector<FrDump> read_fr_dumps(const std::string& dir);

// One file, pickle or JSON by its first byte.
FrDump read_fr_dump(const std::string& path, int rank);

}  // namespace sdc::goodput
