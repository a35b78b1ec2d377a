// The worker protocol's decoders: each line a worker writes decodes to what was sent, and each
// malformed line or device list is a WorkerProtocolError naming what is wrong, which the CLI reports
// as "could not test: worker protocol error: ...".
#include "scheduler/qualify/worker_protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/error.hpp"

namespace sdc {
namespace {

ProbeResult passing() {
  ProbeResult r;
  r.probe = "mem.a";
  r.device_uuid = "CPU-0";
  r.outcome = Outcome::kPass;
  r.report.checked = 8;
  return r;
}

std::string chomp(std::string line) {
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

TEST(WorkerProtocol, EachLineAWorkerWritesDecodesToWhatItSent) {
  WorkerLine start = parse_worker_line(chomp(worker_start_line("mem.a", true)));
  EXPECT_EQ(start.kind, WorkerLine::Kind::kStart);
  EXPECT_EQ(start.text, "mem.a");
  EXPECT_TRUE(start.retry);
  EXPECT_EQ(parse_worker_line(chomp(worker_beat_line())).kind, WorkerLine::Kind::kBeat);
  const WorkerLine result = parse_worker_line(chomp(worker_result_line(passing(), false)));
  EXPECT_EQ(result.kind, WorkerLine::Kind::kResult);
  EXPECT_FALSE(result.retry);
  EXPECT_EQ(to_json(result.result), to_json(passing()));
  const WorkerLine bad_input = parse_worker_line(chomp(worker_input_error_line("--size: too large")));
  EXPECT_EQ(bad_input.kind, WorkerLine::Kind::kInputError);
  EXPECT_EQ(bad_input.text, "--size: too large");
}

TEST(WorkerProtocol, AMalformedLineIsAWorkerProtocolErrorNamingWhatIsWrong) {
  const nlohmann::json good = to_json(passing());
  auto result_with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json r = good;
    r[key] = value;
    return nlohmann::json{{"result", r}}.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"result":)", "a line that is not JSON"},
      {"[1,2]", "a line that is not a JSON object"},
      {R"({"start":7})", "\"start\" is not a string"},
      {R"({"retry":true})", "no \"result\""},
      {result_with("seed", 3.4e21), "\"seed\" is not an integer in [0, "},
      {result_with("device_index", 1e300), "\"device_index\" is not an integer in [0, "},
      {result_with("checked", -1), "\"checked\" is not an integer in [0, "},
      {result_with("outcome", "passed"), "worker sent an unknown outcome 'passed'"},
      {result_with("duration_s", "1"), "\"duration_s\" is not a finite number >= 0"},
      {result_with("records", nlohmann::json::array({nlohmann::json{{"index", 1}}})), "no \"expected\""},
      {result_with("digest", "xyz"), "\"digest\": a digest is 32 lowercase hex digits, not 'xyz'"},
  };
  for (const auto& [line, named] : cases) {
    try {
      parse_worker_line(line);
      ADD_FAILURE() << "decoded: " << line;
    } catch (const WorkerProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << line << ": " << e.what();
      EXPECT_EQ(describe_error(e), "worker protocol error: " + std::string(e.what()));
    }
  }
}

TEST(WorkerProtocol, ADeviceListItCannotReadIsAWorkerProtocolErrorAndNoListIsNoDevice) {
  DeviceIdentity cpu;
  cpu.backend = "cpu";
  cpu.uuid = "CPU-0";
  const std::string good = nlohmann::json{{"devices", {identity_to_json(cpu)}}}.dump();
  const std::vector<DeviceIdentity> devices = devices_from_answer(good, "exited with code 0");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].uuid, "CPU-0");

  nlohmann::json bad = identity_to_json(cpu);
  bad["index"] = "zero";
  try {
    devices_from_answer(nlohmann::json{{"devices", {identity_to_json(cpu), bad}}}.dump(), "exited with code 0");
    FAIL() << "no exception";
  } catch (const WorkerProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("device 1 of the `devices` answer"), std::string::npos) << e.what();
  }
  // The child's own reason, or no answer at all: no device to test (InputError, not the protocol).
  try {
    devices_from_answer(R"({"error":"no CUDA driver"})", "exited with code 2");
    FAIL() << "no exception";
  } catch (const NoDeviceError& e) {
    EXPECT_STREQ(e.what(), "no CUDA driver");
  }
  try {
    devices_from_answer("", "killed by signal 9 (Killed)");
    FAIL() << "no exception";
  } catch (const NoDeviceError& e) {
    EXPECT_STREQ(e.what(), "cannot list the devices: `devices` killed by signal 9 (Killed) without a device list");
  }
  EXPECT_THROW(devices_from_answer(R"({"devices":[]})", "exited with code 0"), NoDeviceError);
}

}  // namespace
}  // namespace sdc
