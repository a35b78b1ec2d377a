// `sdcprobe fleet goodput`: argument parsing only; the work is in goodput/cluster/cluster_command.cpp.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "fleet/store_jobs.hpp"
#include "goodput/cluster/cluster_command.hpp"

namespace sdc::cli {

void add_fleet_goodput_command(CLI::App& fleet, int& exit_code) {
  auto o = std::make_shared<goodput::cluster::FleetGoodputOptions>();
  auto* g =
      fleet.add_subcommand("goodput", "Cluster ETTR, GPU-weighted, and a work list of where the missing GPU-time went");
  g->add_option("--sacct", o->inputs.sacct_path,
                "Slurm's accounting of every job (sacct --allocations --duplicates --json --allusers)")
      ->required();
  g->add_option("--logs", o->inputs.logs_template,
                "Event logs of a job: a path or glob with {job_id}, e.g. 'ROOT/{job_id}/events.rank*.jsonl'");
  g->add_option("summaries", o->inputs.summaries,
                "Per-job summaries (sdcprobe goodput --json --job-id N), files or directories of *.json");
  auto store = std::make_shared<std::string>();
  g->add_option("--store", *store,
                "Also the job summaries of a fleet store's jobs table (docs/fleet.md; goodput --store, fleet import "
                "--summaries), read by embedded DuckDB ($SDCPROBE_PYTHON, else python3)")
      ->type_name("DIR");
  g->add_option("--health", o->inputs.health,
                "The nodes' `sdcprobe health --json` reports: a node whose hang-culprit GPU shows a fault there "
                "(an XID, a recovery action) is marked as hardware");
  g->add_option("--since", o->since, "Start of the window: a duration before its end (7d) or RFC 3339");
  g->add_option("--until", o->until, "End of the window, RFC 3339 (default: the newest time in the accounting)");
  g->add_option("--by", o->by, "Group the work list's items by user, account, partition or job")->capture_default_str();
  g->add_option("--top", o->top, "Groups listed per work-list item")
      ->check(unsigned_in(1, 1'000'000))
      ->capture_default_str();
  g->add_option("--json", o->json_path, "Write the cluster ledger as JSON");
  g->add_option("--markdown", o->markdown_path, "Write the report as Markdown");
  g->add_option("--svg", o->svg_path, "Draw a bar per day and the top of the work list as SVG");
  g->add_option("--prom", o->prom_path, "Write a Prometheus textfile (node_exporter's textfile collector)");
  g->callback([o, store, &exit_code]() {
    if (!store->empty()) o->inputs.summary_texts = store_job_summaries(*store);
    exit_code = goodput::cluster::fleet_goodput_command(*o, std::cout, std::cerr);
  });
}

}  // namespace sdc::cli
