// The fleet SDC report: JSON, Markdown, an SVG picture (failures per model per day, and the top
// suspects) and a Prometheus textfile of the fleet rates.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "fleet/fleet_sdc_analysis.hpp"

namespace sdc {

nlohmann::json fleet_json(const FleetTally& tally, const FleetAnalysis& analysis, const FleetOptions& options);
std::string fleet_markdown(const FleetTally& tally, const FleetAnalysis& analysis, const FleetOptions& options);
std::string fleet_svg(const FleetAnalysis& analysis);
std::string fleet_prometheus(const FleetAnalysis& analysis);

}  // namespace sdc
