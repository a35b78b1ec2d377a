// How a breakdown is shown: a text table with a work list, JSON, and an SVG chart.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "goodput/analyze.hpp"
#include "goodput/breakdown.hpp"

namespace sdc::goodput {

// ETTR, the breakdown table, SDC time lost, the work list and (for a ledger's result) diagnostics.
std::string text_report(const Analysis& analysis, bool diagnostics = true);
// The keys of docs/goodput.md: wall_ns, productive_ns, ettr, sdc_lost_ns, categories, diagnostics.
nlohmann::ordered_json json_report(const Analysis& analysis);
// The ground truth of a simulated run, with the same keys.
std::string json_breakdown(const Breakdown& breakdown);
// A stacked bar of the whole wall time and a ranked bar per loss category with its SDC share.
std::string svg_report(const Breakdown& breakdown);

}  // namespace sdc::goodput
