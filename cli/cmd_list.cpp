#include <cstdio>

#include "cli/commands.hpp"
#include "scheduler/qualify/catalogue.hpp"

namespace sdc::cli {

void add_list_command(CLI::App& app, int& exit_code) {
  auto* sub = app.add_subcommand("list", "The probe catalogue: what each probe targets and what it cannot see");
  sub->callback([&exit_code] {
    for (const auto& p : builtin_registry().probes()) {
      std::printf("%s\n  targets:    %s\n  cannot see: %s\n", p->id().c_str(), p->targets().c_str(),
                  p->blind_spots().c_str());
    }
    exit_code = 0;
  });
}

}  // namespace sdc::cli
