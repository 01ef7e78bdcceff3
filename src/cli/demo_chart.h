// The picture `eaglet demo` leaves next to its table: decode speed of each method against plain
// decoding, and how often each draft position was accepted.
#pragma once
#include <string>
#include <vector>

namespace eaglet::cli {

struct DemoRow {
  std::string method;
  double tokens_per_second = 0;
  double speedup = 1;
  double acceptance_length = 0;             // 0: no proposer
  std::vector<double> acceptance_by_position;  // fraction of drafts whose accepted path reached depth i + 1
};

// `title` names the model, threads and machine so the picture stands on its own.
void write_demo_svg(const std::string& path, const std::string& title, const std::vector<DemoRow>& rows);

}  // namespace eaglet::cli
