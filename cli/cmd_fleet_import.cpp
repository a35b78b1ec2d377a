// sdcprobe fleet import: existing reports and histories into the fleet store (docs/fleet.md#import).
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "fleet/store_import.hpp"

namespace sdc::cli {

void add_fleet_import_command(CLI::App& fleet, int& exit_code) {
  auto* sub = fleet.add_subcommand(
      "import",
      "Load JSON reports and history.db files (read-only) into a fleet store; importing the same input again "
      "changes nothing. Exit 0 imported, 2 bad input or a store that cannot be written");
  struct Args {
    std::vector<std::string> inputs;
    std::string store;
  };
  auto args = std::make_shared<Args>();
  sub->add_option("inputs", args->inputs,
                  "JSON reports (qualify --json, sweep --spool-dir), history.db files, or directories of them")
      ->required();
  sub->add_option("--store", args->store, "The fleet store to write (docs/fleet.md)")->type_name("DIR")->required();
  sub->callback([&exit_code, args] {
    const StoreImport done = import_into_store(args->inputs, args->store);
    std::printf("sdcprobe fleet import: %llu reports and %llu histories, %llu results in %llu files, into %s\n",
                static_cast<unsigned long long>(done.reports), static_cast<unsigned long long>(done.histories),
                static_cast<unsigned long long>(done.results), static_cast<unsigned long long>(done.files),
                args->store.c_str());
    exit_code = 0;
  });
}

}  // namespace sdc::cli
