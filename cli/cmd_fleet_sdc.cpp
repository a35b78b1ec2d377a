// sdcprobe fleet sdc: many nodes' reports and histories compared (docs/consensus.md#fleet).
#include <cstdio>
#include <memory>
#include <regex>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "fleet/fleet_aggregates.hpp"
#include "fleet/fleet_sdc_ingest.hpp"
#include "fleet/fleet_sdc_output.hpp"
#include "host/atomic_file.hpp"
#include "host/error.hpp"
#include "host/progress.hpp"

namespace sdc::cli {

void add_fleet_sdc_command(CLI::App& fleet, int& exit_code) {
  auto* sub = fleet.add_subcommand(
      "sdc",
      "Consensus across the fleet, SDC rates per GPU model, lemon nodes and fault locations from many nodes' "
      "JSON reports and history.db files, or from a fleet store (docs/fleet.md). Exit 0 clean, 1 a suspect, lemon "
      "or inconclusive vote, 2 bad input or nothing compared");
  struct Args {
    std::vector<std::string> inputs;
    std::string store, aggregates, since, until;
    std::string json_path, markdown_path, svg_path, prom_path, golden_path, topology_path;
    FleetOptions options;
    std::optional<uint64_t> golden_seed;
    unsigned threads = 0;
  };
  auto args = std::make_shared<Args>();
  auto* inputs = sub->add_option(
      "inputs", args->inputs, "JSON reports (qualify --json, sweep --spool-dir), history.db files, or directories of them");
  auto* store = sub->add_option("--store", args->store,
                                "Read a fleet store instead (docs/fleet.md): its aggregations run in embedded DuckDB "
                                "($SDCPROBE_PYTHON, else python3, with the duckdb package and sdcprobe's)");
  auto* aggregates = sub->add_option("--aggregates", args->aggregates,
                                     "Read the aggregate tables the Spark job wrote from a store (docs/fleet.md)");
  inputs->excludes(store, aggregates);
  store->excludes(aggregates);
  const auto day = CLI::Validator(
      [](std::string& text) {
        return std::regex_match(text, std::regex(R"(\d{4}-\d{2}-\d{2})")) ? "" : "expected a day like 2026-12-01";
      },
      "YYYY-MM-DD");
  sub->add_option("--since", args->since, "--store: the first day read (UTC)")->check(day)->needs(store);
  sub->add_option("--until", args->until, "--store: the last day read (UTC)")->check(day)->needs(store);
  sub->add_option("--json", args->json_path, "Write the JSON report to FILE (atomically)");
  sub->add_option("--markdown", args->markdown_path, "Write the Markdown report to FILE (it also goes to stdout)");
  sub->add_option("--svg", args->svg_path, "Write a picture: failures per model per day, and the top suspects");
  sub->add_option("--prom", args->prom_path, "Write the fleet rates as a Prometheus textfile");
  sub->add_option("--fdr", args->options.fdr, "False-discovery rate of the lemon tests")
      ->check(finite_in(1e-9, 0.5))
      ->capture_default_str();
  sub->add_option("--golden-out", args->golden_path,
                  "Write a golden file (format 2) from the digests whose majority spans --golden-min-nodes nodes and "
                  "99% of the devices, for nodes that later run alone (qualify --golden)");
  sub->add_option("--golden-min-nodes", args->options.golden_min_nodes, "See --golden-out")
      ->check(unsigned_in(1, 1000000))
      ->capture_default_str();
  sub->add_option("--golden-seed", args->golden_seed, "--golden-out from this seed's votes (default: the most voted)")
      ->check(unsigned_in(0, UINT64_MAX));
  sub->add_option("--topology", args->topology_path,
                  "Test racks, switches and power domains as nodes are: lines 'NODE KIND=NAME ...' (e.g. 'n01 rack=R1 "
                  "pdu=P2') or Slurm topology.conf 'SwitchName=S Nodes=n[01-08]'");
  sub->add_option("--threads", args->threads, "Parsing threads (default: one per core)")->check(unsigned_in(1, 1024));
  sub->callback([&exit_code, args] {
    args->options.golden_seed = args->golden_seed;
    if (!args->topology_path.empty()) args->options.topology = load_topology(args->topology_path);
    if (args->inputs.empty() && args->store.empty() && args->aggregates.empty()) {
      throw InputError("fleet sdc: give reports or histories, --store DIR or --aggregates DIR");
    }
    Progress progress("fleet sdc");
    const FleetTally tally = !args->store.empty()        ? aggregate_fleet_store(args->store, args->since, args->until)
                             : !args->aggregates.empty() ? read_fleet_aggregates(args->aggregates)
                                                         : ingest_fleet(args->inputs, args->threads, &progress);
    const FleetAnalysis analysis = analyze_fleet(tally, args->options);
    if (analysis.exit_code() == 2) {
      // Could not test: a report would read as a clean fleet, so none is written.
      std::string inputs = args->store + args->aggregates;
      for (const auto& p : args->inputs) inputs += (inputs.empty() ? "" : ", ") + p;
      std::fprintf(stderr,
                   "sdcprobe: fleet sdc: could not test: no vote had two devices and nothing failed in %s; "
                   "no report written\n",
                   inputs.c_str());
      exit_code = 2;
      return;
    }
    std::optional<GoldenFile> golden;
    if (!args->golden_path.empty()) golden = fleet_golden(analysis, args->options);
    const std::string markdown = fleet_markdown(tally, analysis, args->options);
    std::fputs(markdown.c_str(), stdout);
    if (!args->json_path.empty()) {
      write_file_atomically(args->json_path, fleet_json(tally, analysis, args->options).dump(2) + "\n");
    }
    if (!args->markdown_path.empty()) write_file_atomically(args->markdown_path, markdown);
    if (!args->svg_path.empty()) write_file_atomically(args->svg_path, fleet_svg(analysis));
    if (!args->prom_path.empty()) write_file_atomically(args->prom_path, fleet_prometheus(analysis));
    if (golden) {
      write_file_atomically(args->golden_path, golden_to_json(*golden));
      std::printf("\nwrote %zu digests to %s (seed 0x%016llx)\n", golden->digests.size(), args->golden_path.c_str(),
                  static_cast<unsigned long long>(golden->seed));
    }
    exit_code = analysis.exit_code();
  });
}

}  // namespace sdc::cli
