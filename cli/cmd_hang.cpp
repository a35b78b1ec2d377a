// `sdcprobe hang DIR`: argument parsing only; the work is in goodput/hang_command.cpp.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/validators.hpp"
#include "goodput/hang_command.hpp"

namespace sdc::cli {

void add_hang_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<goodput::HangOptions>();
  auto* h = app.add_subcommand("hang", "Name the rank that hung a job, from every rank's flight-recorder dump");
  h->add_option("dir", options->dir, "Folder of the dumps (PREFIX<rank>, pickle or JSON, as torch writes them)")
      ->required();
  h->add_option("--json", options->json_path, "Also write the report as JSON to this file");
  h->add_option("--events", options->events,
                "The job's event logs (files or glob patterns): each culprit's host, GPU UUID and PCI bus id from "
                "its process_start in the attempt DIR names (attempt<N>), else its last");
  h->add_option("--world-size", options->world_size, "Ranks in the job (default: from the dumps)")
      ->check(unsigned_in(1, 10'000'000));
  h->callback([options, &exit_code]() { exit_code = goodput::hang_command(*options, std::cout); });
}

}  // namespace sdc::cli
