// JSON forms of the figures generate and bench print (schema documented in the README).
#pragma once
#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "speculation/metrics.h"

namespace eaglet::cli {

nlohmann::json stats_json(const GenerationStats& s);
nlohmann::json spec_json(const SpecMetrics& m);
// The p-quantile (0 <= p <= 1) of v, nearest rank; 0 for an empty v.
double percentile(std::vector<double> v, double p);
// A command's last output: the summary line for people, or (--json) one JSON object for scripts.
void print_summary(bool json, const nlohmann::json& j, const std::string& line);

}  // namespace eaglet::cli
