// The worker protocol: what a worker (cli/cmd_worker.cpp) writes to fd 3 (kWorkerProtocolFd), one
// JSON line each, and how its parent (isolation.hpp) reads it back: a line when a probe starts, a
// heartbeat as it progresses, one line with each result, or one with bad input found by the
// worker. Also the answer of `devices --protocol-fd`. Every field is checked for type and range: a
// worker whose memory is corrupt may send anything.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "host/error.hpp"
#include "scheduler/qualify/runner.hpp"

namespace sdc {

inline constexpr int kWorkerProtocolFd = 3;

// The worker's side.
std::string worker_start_line(const std::string& probe_id, bool retry = false);
std::string worker_beat_line();
std::string worker_result_line(const ProbeResult& result, bool retry);
// Bad input found by the worker (e.g. a size a probe rejects): run_worker rethrows it as InputError.
std::string worker_input_error_line(const std::string& message);

// One line from a worker, decoded.
struct WorkerLine {
  enum class Kind { kBeat, kStart, kResult, kInputError };
  Kind kind = Kind::kBeat;
  bool retry = false;  // a start or result of the re-run after a failure
  std::string text;    // kStart: the probe id; kInputError: the message
  ProbeResult result;  // kResult
};

// Decodes one line (without its newline). Throws WorkerProtocolError for a line that is not the
// protocol, naming what is wrong with it.
WorkerLine parse_worker_line(const std::string& text);

// The inverse of to_json(ProbeResult). Throws WorkerProtocolError naming a field that is missing,
// of another type or out of range.
ProbeResult result_from_json(const nlohmann::json& j);

// The devices in the answer of `devices --protocol-fd` ({"devices": [...]}). Throws NoDeviceError
// with the child's reason ({"error": "..."}), or saying how the child ended (`how_it_ended`) when it
// sent no device list or an empty one; WorkerProtocolError for a device it cannot read.
std::vector<DeviceIdentity> devices_from_answer(const std::string& answer, const std::string& how_it_ended);

}  // namespace sdc
