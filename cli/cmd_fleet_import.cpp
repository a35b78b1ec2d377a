// sdcprobe fleet import: existing reports and histories into the fleet store (docs/fleet.md#import).
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <memory>

#include "cli/commands.hpp"
#include "fleet/store_import.hpp"
#include "fleet/store_jobs.hpp"
#include "goodput/cluster/cluster_summary.hpp"
#include "host/error.hpp"
#include "host/input_file.hpp"

namespace sdc::cli {

void add_fleet_import_command(CLI::App& fleet, int& exit_code) {
  auto* sub = fleet.add_subcommand(
      "import",
      "Load JSON reports and history.db files (read-only) into a fleet store; importing the same input again "
      "changes nothing. Exit 0 imported, 2 bad input or a store that cannot be written");
  struct Args {
    std::vector<std::string> inputs, summaries;
    std::string store;
  };
  auto args = std::make_shared<Args>();
  sub->add_option(
      "inputs", args->inputs, "JSON reports (qualify --json, sweep --spool-dir), history.db files, or directories of them");
  sub->add_option("--summaries", args->summaries,
                                    "Job summaries (sdcprobe goodput --json --job-id N), files or directories of "
                                    "*.json, into the jobs table");
  sub->add_option("--store", args->store, "The fleet store to write (docs/fleet.md)")->type_name("DIR")->required();
  sub->callback([&exit_code, args] {
    if (args->inputs.empty() && args->summaries.empty()) throw InputError("fleet import: give reports, histories or --summaries");
    size_t jobs = 0;
    for (const std::string& file : goodput::cluster::summary_files(args->summaries)) {
      // Stored when it was written: the epilog writes it as the job ends.
      struct stat st {};
      const double at = ::stat(file.c_str(), &st) == 0 ? static_cast<double>(st.st_mtime)
                                                       : static_cast<double>(std::time(nullptr));
      publish_job_summary(args->store, file, read_input(file, "job summary"), at);
      ++jobs;
    }
    StoreImport done;
    if (!args->inputs.empty()) done = import_into_store(args->inputs, args->store);
    std::printf("sdcprobe fleet import: %llu reports and %llu histories, %llu results in %llu files, %zu job summaries, "
                "into %s\n",
                static_cast<unsigned long long>(done.reports), static_cast<unsigned long long>(done.histories),
                static_cast<unsigned long long>(done.results), static_cast<unsigned long long>(done.files), jobs,
                args->store.c_str());
    exit_code = 0;
  });
}

}  // namespace sdc::cli
