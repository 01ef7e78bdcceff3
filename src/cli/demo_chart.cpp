#include "cli/demo_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"

namespace eaglet::cli {

namespace {
const char* kColours[] = {"#9e9e9e", "#f0a030", "#2e7bd6", "#1b4f91", "#5aa05a"};

// Text inside SVG: the model label comes from a path the user chose.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '\'') out += "&apos;";
    else out += c;
  }
  return out;
}
}  // namespace

void write_demo_svg(const std::string& path, const std::string& title, const std::vector<DemoRow>& rows) {
  const double W = 860, H = 400, top = 60, bottom = 320;
  std::string svg = fmt::format(
      "<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif'>\n"
      "<rect width='100%' height='100%' fill='white'/>\n"
      "<text x='20' y='24' font-size='15' font-weight='bold'>{}</text>\n",
      W, H, escape(title));

  // Left panel: decode tokens/s, one bar per method, speedup written on top.
  const double l0 = 60, l1 = 400;
  double max_tps = 0;
  for (auto& r : rows) max_tps = std::max(max_tps, r.tokens_per_second);
  max_tps = max_tps > 0 ? max_tps * 1.15 : 1;
  svg += fmt::format("<text x='{}' y='{}' font-size='13'>decode tokens/s (speedup over plain decoding)</text>\n", l0, top - 12);
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#888'/>\n", l0, bottom, l1, bottom);
  const double slot = (l1 - l0) / double(std::max<size_t>(rows.size(), 1));
  for (size_t i = 0; i < rows.size(); ++i) {
    const double h = (bottom - top) * rows[i].tokens_per_second / max_tps, x = l0 + slot * double(i) + slot * 0.15;
    svg += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>\n", x, bottom - h, slot * 0.7, h,
                       kColours[i % 5]);
    svg += fmt::format("<text x='{:.1f}' y='{:.1f}' font-size='12' text-anchor='middle'>{:.1f} ({:.2f}x)</text>\n",
                       x + slot * 0.35, bottom - h - 5, rows[i].tokens_per_second, rows[i].speedup);
    // Method names wrap at ", " so four fit side by side.
    std::string name = escape(rows[i].method), lines;
    for (size_t start = 0, line = 0; start != std::string::npos; ++line) {
      const size_t comma = name.find(", ", start);
      lines += fmt::format("<tspan x='{:.1f}' dy='{}'>{}</tspan>", x + slot * 0.35, line ? 13 : 0,
                           name.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      start = comma == std::string::npos ? comma : comma + 2;
    }
    svg += fmt::format("<text y='{:.1f}' font-size='11' text-anchor='middle'>{}</text>\n", bottom + 16, lines);
  }

  // Right panel: acceptance by draft position, grouped bars per proposer.
  const double r0 = 480, r1 = 840;
  size_t positions = 0;
  for (auto& r : rows) positions = std::max(positions, r.acceptance_by_position.size());
  svg += fmt::format("<text x='{}' y='{}' font-size='13'>drafts accepted up to position (fraction)</text>\n", r0, top - 12);
  svg += fmt::format("<line x1='{}' y1='{}' x2='{}' y2='{}' stroke='#888'/>\n", r0, bottom, r1, bottom);
  for (double v : {0.25, 0.5, 0.75, 1.0})
    svg += fmt::format("<text x='{}' y='{:.1f}' font-size='10' text-anchor='end'>{:.2f}</text>\n", r0 - 4,
                       bottom - (bottom - top) * v / 1.1 + 3, v);
  const double group = (r1 - r0) / double(std::max<size_t>(positions, 1));
  size_t proposers = 0;
  for (auto& r : rows) proposers += !r.acceptance_by_position.empty();
  for (size_t p = 0; p < positions; ++p) {
    size_t k = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].acceptance_by_position.empty()) continue;
      const double bw = group * 0.8 / double(proposers), x = r0 + group * double(p) + group * 0.1 + bw * double(k++);
      const double v = p < rows[i].acceptance_by_position.size() ? rows[i].acceptance_by_position[p] : 0;
      const double h = (bottom - top) * v / 1.1;
      svg += fmt::format("<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'/>\n", x, bottom - h, bw, h,
                         kColours[i % 5]);
    }
    svg += fmt::format("<text x='{:.1f}' y='{:.1f}' font-size='11' text-anchor='middle'>{}</text>\n", r0 + group * (double(p) + 0.5),
                       bottom + 16, p + 1);
  }
  // Legend, one line per proposer, under the axis labels.
  size_t k = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].acceptance_by_position.empty()) continue;
    const double y = bottom + 34 + 14 * double(k++);
    svg += fmt::format("<rect x='{}' y='{}' width='10' height='10' fill='{}'/><text x='{}' y='{}' font-size='11'>{} "
                       "(mean acceptance length {:.2f})</text>\n",
                       r0, y - 9, kColours[i % 5], r0 + 14, y, escape(rows[i].method), rows[i].acceptance_length);
  }
  svg += "</svg>\n";
  std::ofstream out(path);
  out << svg;
  if (!out) fail("{}: cannot write", path);
}

}  // namespace eaglet::cli
