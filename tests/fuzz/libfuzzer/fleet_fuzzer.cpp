// The fleet report reader (`fleet sdc`): many nodes' qualify and sweep JSON reports read into one
// tally, then analysed. The input is the reports separated by "\n--\n", named node0.json, node1.json,
// ... Properties, as the seeded FleetFuzz test: each report is read, or refused with an InputError
// whose message starts with its name; the analysis of what was read raises nothing; never another
// exception. Seeds (corpus/fleet/): reports the real binary (the fuzz preset's) wrote on a CPU-only VM,
// `sdcprobe --backend cpu ...`:
//   qualify_cpu_pass.json: qualify --size 1M --iterations 1 --json F
//   run_alu_fma32.json: run alu.fma32 --iterations 1 --json F
//   run_injected_mem_fault.json: --cpu-devices 2 run mem.walking_bits alu.fma64 --size 1M --iterations 1
//     --inject 'device=0,probe=mem.walking_bits,model=bitflip,bit=3,mode=permanent' --json F
//   sweep_spool_report.json: --cpu-devices 2 sweep --once --idle-check true --size 1M --iterations 1
//     --budget 30s --state-dir S --prom-dir S --spool-dir D (the report it left in D)
//   two_nodes_same_seed: two runs of --cpu-devices 2 run alu.fma32 mem.walking_bits --size 1M
//     --iterations 1 --seed 0x5eed --json F, the second with --inject 'device=1,probe=alu.fma32,
//     model=bitflip,bit=7,mode=permanent', joined by "\n--\n": one vote that out-votes a device
//   qualify_faults.json: tests/fuzz/fleet's, the seeded test's corpus.
#include <cstdint>
#include <string>

#include "fleet/fleet_sdc_analysis.hpp"
#include "fleet/fleet_sdc_ingest.hpp"
#include "host/error.hpp"
#include "tests/fuzz/libfuzzer/harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sdc;
  const std::string text = fuzz::as_text(data, size);
  const std::string separator = "\n--\n";
  FleetTally tally;
  size_t start = 0;
  for (int node = 0;; ++node) {
    const size_t at = text.find(separator, start);
    const std::string name = "node" + std::to_string(node) + ".json";
    try {
      ingest_report_text(name, std::string_view(text).substr(start, at == std::string::npos ? at : at - start), tally);
    } catch (const InputError& e) {
      // As `fleet sdc` does, the first bad file stops the reading.
      SDC_FUZZ_CHECK(std::string(e.what()).rfind(name + ": ", 0) == 0, e.what());
      return 0;
    }
    if (at == std::string::npos) break;
    start = at + separator.size();
  }
  analyze_fleet(tally, {});
  return 0;
}
