#include "cli/bench_report.h"

#include <cstdio>

#include "cli/report.h"

namespace eaglet::cli {

using nlohmann::json;

void print_header(const BenchHeader& h) {
  std::printf("model: %s | kernels: %s | prompts: %zu (%s) | max tokens: %d | temperature: %.2f\n", h.model.c_str(),
              h.kernels.c_str(), h.num_prompts, h.dataset.c_str(), h.max_tokens, h.temperature);
  std::printf("speculation: %s | active-parameter weights per token: %.3f GB\n", h.speculation.c_str(),
              h.active_weight_gb);
  auto list = [](const std::vector<std::pair<std::string, int>>& counts) {
    std::string s;
    for (auto& [name, count] : counts) s += (s.empty() ? "" : ", ") + name + " x" + std::to_string(count);
    return s;
  };
  std::printf("cpu: %s | features: %s | amx: %s\nmatmul kernels: %s\n", h.cpu.c_str(), h.cpu_features.c_str(),
              h.amx.c_str(), list(h.matmul_kernels).c_str());
  if (!h.draft_matmul_kernels.empty()) std::printf("draft matmul kernels: %s\n", list(h.draft_matmul_kernels).c_str());
}

void print_cost_curve(const BenchCostCurve& c) {
  std::printf("  forward cost c(n)/c(1):");
  for (auto& [n, sec] : c.seconds) std::printf(" %d:%.2f", n, sec / c.seconds.front().second);
  if (!c.chains_only.empty()) {
    std::printf("\n  (no tree verification: %s verifies chains only)\n", c.chains_only.c_str());
    return;
  }
  std::printf("\n  16-node tree verification (topk 4, depth 2): %.2f ms = %.2fx one step\n", c.tree.verify.seconds * 1e3,
              c.tree.ratio());
}

namespace {
void print_bandwidth_share(double gbps, const MemoryBandwidth& bw) {
  std::printf(" (%.0f%% of read, %.0f%% of copy bandwidth", 100 * gbps / bw.read_gbps, 100 * gbps / bw.copy_gbps);
}

void print_costs(const BenchRun& run, const BenchHeader& h) {
  const VerifyCost& vc = run.verify;
  std::printf("  prefill  : %7.1f tok/s (%d tokens)\n", run.prefill_tokens_per_second, run.prefill_tokens);
  std::printf("  one step : %7.2f ms, reads %.3f GB (active parameters %.3f GB)", vc.step.seconds * 1e3,
              vc.step.weight_gb, h.active_weight_gb);
  if (vc.step.experts_touched) std::printf(", %lld experts", (long long)vc.step.experts_touched);
  std::printf("\n  %d-token verification: %7.2f ms = %.2fx one step, reads %.3f GB", vc.verify_tokens,
              vc.verify.seconds * 1e3, vc.ratio(), vc.verify.weight_gb);
  if (run.verify_gflops > 0) std::printf(", %.1f GFLOP/s", run.verify_gflops);
  if (vc.verify.experts_touched)
    std::printf(", %lld experts (union over its tokens, summed over layers)", (long long)vc.verify.experts_touched);
  std::printf("\n");
}
}  // namespace

void print_baseline(const BenchRun& run, const BenchHeader& h) {
  const BenchBaseline& b = run.baseline;
  std::printf("\n[threads %d]\n", run.threads);
  if (b.probed)
    std::printf("  memory bandwidth (same run, best of %zu probes: before the decode and after each prompt): read %.1f GB/s, copy %.1f GB/s\n",
                b.run.probes.size(), b.run.best.read_gbps, b.run.best.copy_gbps);
  print_costs(run, h);
  if (b.max_num_seqs > 1) {
    std::printf("  baseline : %7.2f tok/s output, %lld tokens, %d sequences at a time (prefill included)\n",
                b.totals().tokens_per_second(), (long long)b.totals().tokens, b.max_num_seqs);
    return;
  }
  const double eff = b.bandwidth(), eff_p50 = b.bandwidth_at_median_step();
  std::printf("  baseline : %7.2f tok/s decode, %lld tokens, weights %.1f GB/s", b.totals().tokens_per_second(),
              (long long)b.totals().tokens, eff);
  if (b.probed) {
    print_bandwidth_share(eff, b.run.best);
    std::printf("; %.0f%% / %.0f%% of the probes around each prompt)", 100 * eff / b.run.nearby.read_gbps,
                100 * eff / b.run.nearby.copy_gbps);
  }
  std::printf("\n  inter-token latency: median %.2f ms, p90 %.2f ms, p99 %.2f ms; at the median step weights %.1f GB/s",
              1e3 * b.itl_p50, 1e3 * b.itl_p90, 1e3 * b.itl_p99, eff_p50);
  if (b.probed) {
    print_bandwidth_share(eff_p50, b.run.best);
    std::printf(")");
  }
  std::printf("\n");
}

void print_unconstrained(const BenchRun& run) {
  const double free = run.unconstrained->tokens_per_second(), held = run.baseline.totals().tokens_per_second();
  std::printf("  unconstrained (before and after the baseline): %7.2f tok/s decode, %lld tokens; the constrained baseline decodes at %.1f%% of it\n", free,
              (long long)run.unconstrained->tokens, free > 0 ? 100 * held / free : 0.0);
}

void print_speculative(const BenchSpeculative& s) {
  std::printf("  %s\n    %7.2f tok/s %s, %lld tokens, speedup %.2fx, outputs identical to baseline: %d/%zu\n",
              s.draft_shape.c_str(), s.totals.tokens_per_second(), s.batched ? "output" : "decode", (long long)s.totals.tokens, s.speedup, s.identical,
              s.prompts);
  std::printf("    %s\n", s.totals.spec.summary().c_str());
  std::printf("    time split: target %.2fs, draft %.2fs, verify %.2fs\n", s.totals.spec.target_seconds,
              s.totals.spec.draft_seconds, s.totals.spec.verify_seconds);
}

namespace {
json pass_json(const PassCost& p) {
  return json{{"seconds", p.seconds}, {"weight_gb", p.weight_gb}, {"experts_touched", p.experts_touched}};
}

json header_json(const BenchHeader& h) {
  auto counts = [](const std::vector<std::pair<std::string, int>>& list) {
    json j = json::object();
    for (auto& [name, count] : list) j[name] = count;
    return j;
  };
  return {{"model", h.model},
          {"kernels", h.kernels},
          {"matmul_kernels", counts(h.matmul_kernels)},
          {"draft_matmul_kernels", counts(h.draft_matmul_kernels)},
          {"cpu", h.cpu},
          {"cpu_features", h.cpu_features},
          {"amx", h.amx},
          {"dataset", h.dataset},
          {"num_prompts", h.num_prompts},
          {"max_tokens", h.max_tokens},
          {"temperature", h.temperature},
          {"active_weight_gb_per_token", h.active_weight_gb},
          {"runs", json::array()}};
}

void put_cost_curve(const BenchCostCurve& c, json& run) {
  json curve = json::array();
  for (auto& [n, sec] : c.seconds)
    curve.push_back({{"tokens", n}, {"seconds", sec}, {"ratio", sec / c.seconds.front().second}});
  run["cost_curve"] = curve;
  if (c.chains_only.empty())
    run["tree_verify_cost"] = {{"tree_tokens", c.tree.verify_tokens}, {"step", pass_json(c.tree.step)},
                               {"verify", pass_json(c.tree.verify)}, {"ratio", c.tree.ratio()}};
}

json baseline_json(const BenchBaseline& b) {
  const double eff = b.bandwidth(), eff_p50 = b.bandwidth_at_median_step();
  if (b.max_num_seqs > 1)
    return {{"max_num_seqs", b.max_num_seqs},
            {"output_tokens", b.totals().tokens},
            {"seconds", b.totals().seconds},
            {"output_tokens_per_second", b.totals().tokens_per_second()}};
  json j = {{"decode_tokens", b.totals().tokens},
            {"decode_seconds", b.totals().seconds},
            {"decode_tokens_per_second", b.totals().tokens_per_second()},
            {"weight_gb_per_token", b.weight_gb},
            {"effective_bandwidth_gbps", eff},
            {"itl_p50_s", b.itl_p50},
            {"itl_p90_s", b.itl_p90},
            {"itl_p99_s", b.itl_p99},
            {"effective_bandwidth_at_median_step_gbps", eff_p50}};
  if (b.probed) {
    const MemoryBandwidth &bw = b.run.best, &near = b.run.nearby;
    j["fraction_of_read_bandwidth"] = eff / bw.read_gbps;
    j["fraction_of_copy_bandwidth"] = eff / bw.copy_gbps;
    j["fraction_of_read_bandwidth_at_median_step"] = eff_p50 / bw.read_gbps;
    j["fraction_of_copy_bandwidth_at_median_step"] = eff_p50 / bw.copy_gbps;
    j["fraction_of_nearby_read_bandwidth"] = eff / near.read_gbps;
    j["fraction_of_nearby_copy_bandwidth"] = eff / near.copy_gbps;
  }
  return j;
}

json bandwidth_json(const ProbedBaseline& p) {
  json probes = json::array();
  for (const MemoryBandwidth& m : p.probes) probes.push_back({{"read", m.read_gbps}, {"copy", m.copy_gbps}});
  return {{"read", p.best.read_gbps}, {"copy", p.best.copy_gbps}, {"nearby_read", p.nearby.read_gbps},
          {"nearby_copy", p.nearby.copy_gbps}, {"probes", probes}};
}

json speculative_json(const BenchSpeculative& s) {
  const std::string counted = s.batched ? "output" : "decode";  // as the baseline counts them
  return {{"method", s.method},
          {"draft_shape", s.draft_shape},
          {"num_speculative_tokens", s.k},
          {counted + "_tokens", s.totals.tokens},
          {counted + "_seconds", s.totals.seconds},
          {counted + "_tokens_per_second", s.totals.tokens_per_second()},
          {"speedup", s.speedup},
          {"outputs_identical_to_baseline", s.identical},
          {"spec_decode", spec_json(s.totals.spec)}};
}

json run_json(const BenchRun& r) {
  json j = {{"threads", r.threads}};
  j["prefill"] = {{"tokens", r.prefill_tokens}, {"tokens_per_second", r.prefill_tokens_per_second}};
  j["verify_cost"] = {{"prompt_tokens", r.prompt_tokens}, {"verify_tokens", r.verify.verify_tokens},
                      {"step", pass_json(r.verify.step)}, {"verify", pass_json(r.verify.verify)},
                      {"ratio", r.verify.ratio()}};
  if (r.verify_gflops > 0) j["verify_cost"]["gflops"] = r.verify_gflops;
  if (r.cost_curve) put_cost_curve(*r.cost_curve, j);
  j["baseline"] = baseline_json(r.baseline);
  if (r.baseline.probed) j["memory_bandwidth_gbps"] = bandwidth_json(r.baseline.run);
  if (r.unconstrained)
    j["unconstrained"] = {{"tokens", r.unconstrained->tokens}, {"tokens_per_second", r.unconstrained->tokens_per_second()},
                          {"constrained_ratio", r.unconstrained->tokens_per_second() > 0
                                                    ? r.baseline.totals().tokens_per_second() / r.unconstrained->tokens_per_second()
                                                    : 0.0}};
  if (r.speculative) j["speculative"] = speculative_json(*r.speculative);
  for (const BenchSpeculative& s : r.compared) j["speculative_compared"].push_back(speculative_json(s));
  return j;
}
}  // namespace

json bench_json(const BenchReport& r) {
  json j = header_json(r.header);
  for (const BenchRun& run : r.runs) j["runs"].push_back(run_json(run));
  return j;
}

}  // namespace eaglet::cli
