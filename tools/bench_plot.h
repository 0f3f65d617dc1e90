// The `g4c bench --plot` figure: elapsed per configuration (median bar, min–max whisker,
// value label) and the per-phase roofline fraction (prefill, decode) of each configuration.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

namespace g4c::bench {

// `reports`: bench report JSONs (cmd_bench.cpp); each is one configuration, named by "label".
void plot_reports(const std::vector<nlohmann::json>& reports, const std::filesystem::path& png);

}  // namespace g4c::bench
