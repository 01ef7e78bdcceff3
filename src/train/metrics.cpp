#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace eaglet {

MetricsLog::MetricsLog(std::string path) : path_(std::move(path)) {}

void MetricsLog::write(const nlohmann::json& line) {
  if (path_.empty()) return;
  std::ofstream out(path_, std::ios::app);
  EAGLET_CHECK(out.good(), "{}: cannot append metrics", path_);
  out << line.dump() << "\n";
}

double simulated_acceptance(const std::vector<double>& acc, int depth) {
  double al = 1, prod = 1;
  for (int i = 0; i < std::min<int>(depth, int(acc.size())); ++i) {
    prod *= acc[size_t(i)];
    al += prod;
  }
  return al;
}

namespace {
using Series = std::map<int64_t, double>;  // step -> value (a resumed run overwrites repeats)

struct Panel {
  std::string title;
  std::vector<std::pair<std::string, const Series*>> lines;  // legend, points
};

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c"};

// One panel: axes with a few ticks, a polyline per series, a legend.
void draw(std::ostringstream& svg, const Panel& p, double x0, double y0, double w, double h, int64_t max_step) {
  double lo = INFINITY, hi = -INFINITY;
  for (auto& [name, s] : p.lines)
    for (auto& [step, v] : *s) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(lo <= hi)) lo = 0, hi = 1;
  if (hi - lo < 1e-9) lo -= 0.5, hi += 0.5;
  const double pad = 0.05 * (hi - lo);
  lo -= pad, hi += pad;
  const double L = x0 + 60, R = x0 + w - 10, T = y0 + 30, B = y0 + h - 40;
  auto X = [&](double step) { return L + (R - L) * step / double(std::max<int64_t>(1, max_step)); };
  auto Y = [&](double v) { return B - (B - T) * (v - lo) / (hi - lo); };
  svg << fmt::format("<text x='{}' y='{}' font-size='14' font-weight='bold'>{}</text>\n", L, y0 + 18, p.title);
  svg << fmt::format("<rect x='{}' y='{}' width='{}' height='{}' fill='none' stroke='#888'/>\n", L, T, R - L, B - T);
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (hi - lo) * i / 4, st = double(max_step) * i / 4;
    svg << fmt::format("<text x='{}' y='{}' font-size='10' text-anchor='end'>{:.3g}</text>\n", L - 4, Y(v) + 3, v);
    svg << fmt::format("<text x='{}' y='{}' font-size='10' text-anchor='middle'>{:.0f}</text>\n", X(st), B + 14, st);
  }
  svg << fmt::format("<text x='{}' y='{}' font-size='11' text-anchor='middle'>step</text>\n", (L + R) / 2, B + 30);
  for (size_t k = 0; k < p.lines.size(); ++k) {
    const auto& [name, s] = p.lines[k];
    std::string pts;
    for (auto& [step, v] : *s) pts += fmt::format("{:.1f},{:.1f} ", X(double(step)), Y(v));
    const char* c = kColours[k % 3];
    svg << fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'/>\n", c, pts);
    if (s->size() == 1)
      svg << fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'/>\n", X(double(s->begin()->first)),
                         Y(s->begin()->second), c);
    svg << fmt::format("<text x='{}' y='{}' font-size='11' fill='{}'>{}</text>\n", R - 150, T + 14 + 14 * double(k), c,
                       name);
  }
}
}  // namespace

void write_curves_svg(const std::string& metrics_path, const std::string& svg_path, const std::string& acceptance_label) {
  std::ifstream in(metrics_path);
  EAGLET_CHECK(in.good(), "{}: cannot read metrics", metrics_path);
  Series loss, train_al, eval_al;
  std::string line;
  int64_t max_step = 1;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step")) continue;
    const int64_t step = j["step"].get<int64_t>();
    max_step = std::max(max_step, step);
    const std::string kind = j.value("kind", "");
    if (kind == "train") {
      loss[step] = j["loss"].get<double>();
      train_al[step] = j["simulated_acceptance"].get<double>();
    } else if (kind == "eval") {
      eval_al[step] = j["simulated_acceptance"].get<double>();
    }
  }
  std::ostringstream svg;
  const double W = 900, H = 320;
  svg << fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif'>\n", W,
                     2 * H);
  svg << "<rect width='100%' height='100%' fill='white'/>\n";
  draw(svg, {"training loss (weighted over TTT steps or block slots)", {{"train", &loss}}}, 0, 0, W, H, max_step);
  draw(svg, {acceptance_label, {{"train batches", &train_al}, {"held-out eval", &eval_al}}},
       0, H, W, H, max_step);
  svg << "</svg>\n";
  std::ofstream out(svg_path);
  EAGLET_CHECK(out.good(), "{}: cannot write", svg_path);
  out << svg.str();
}

}  // namespace eaglet
