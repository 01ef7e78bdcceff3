#include "models/minimax/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/ops.h"

namespace eaglet {

void GatedActivation::apply(const float* gate, const float* up, float* out, int64_t n) const {
  if (!swiglu_oai) {
    kernels::silu_mul(gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(-alpha * g)) * (u + beta);
  }
}

void mlp_forward(ThreadPool& pool, const MlpWeights& w, const GatedActivation& act, const float* x, int64_t T, float* out,
                 FfnStats* stats) {
  const int64_t I = w.gate.rows;
  std::vector<float> g(size_t(T * I)), u(size_t(T * I));
  kernels::matmul_gated(pool, x, T, w.gate, w.up, g.data(), u.data(),
                        [&](const float* gate, const float* up, float* o, int64_t n) { act.apply(gate, up, o, n); });
  kernels::matmul(pool, g.data(), T, w.down, out);
  if (stats) stats->weight_bytes += w.nbytes();
}

namespace {

struct Choice {
  int expert;
  float weight;
};

std::vector<Choice> route(const MoeWeights& w, const MoeRouting& r, const float* logits, int E) {
  std::vector<float> s(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e) {
    s[size_t(e)] = 1.0f / (1.0f + std::exp(-logits[e]));
    biased[size_t(e)] = s[size_t(e)] + (w.bias.empty() ? 0.0f : w.bias[size_t(e)]);
  }
  std::vector<int> ids(static_cast<size_t>(E));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + r.top_k, ids.end(), [&](int a, int b) {
    return biased[size_t(a)] != biased[size_t(b)] ? biased[size_t(a)] > biased[size_t(b)] : a < b;
  });
  float sum = 0;
  for (int j = 0; j < r.top_k; ++j) sum += s[size_t(ids[size_t(j)])];
  std::vector<Choice> out(static_cast<size_t>(r.top_k));
  for (int j = 0; j < r.top_k; ++j) out[size_t(j)] = {ids[size_t(j)], s[size_t(ids[size_t(j)])] / sum};
  return out;
}

}  // namespace

namespace {
// Every token routed, and each expert's tokens in token order (what gathers its batch).
struct Routed {
  std::vector<Choice> choices;                // [T, K]
  std::vector<std::vector<int64_t>> tokens_of;  // per expert
  std::vector<int> active;                    // experts with tokens, ascending
};

Routed route_all(ThreadPool& pool, const MoeWeights& w, const MoeRouting& routing, const float* x, int64_t T) {
  const int E = int(w.experts.size()), K = routing.top_k;
  std::vector<float> logits(size_t(T) * size_t(E));
  kernels::matmul(pool, x, T, w.router, logits.data());
  Routed r{std::vector<Choice>(size_t(T) * size_t(K)), std::vector<std::vector<int64_t>>(size_t(E)), {}};
  for (int64_t t = 0; t < T; ++t) {
    auto c = route(w, routing, logits.data() + t * E, E);
    for (int j = 0; j < K; ++j) {
      r.choices[size_t(t * K + j)] = c[size_t(j)];
      r.tokens_of[size_t(c[size_t(j)].expert)].push_back(t);
    }
  }
  for (int e = 0; e < E; ++e)
    if (!r.tokens_of[size_t(e)].empty()) r.active.push_back(e);
  return r;
}

struct Batch {
  std::vector<float> x, g, u, y;
};

// Each active expert's MLP over its gathered tokens (and the shared expert over all of them, the
// last batch): gate and up of all experts in one grouped matmul, then all down projections.
std::vector<Batch> run_experts(ThreadPool& pool, const MoeWeights& w, const Routed& r, const GatedActivation& act,
                               const float* x, int64_t T) {
  const int64_t H = w.router.cols;
  std::vector<Batch> batches(r.active.size() + 1);
  std::vector<const MlpWeights*> mlps;
  std::vector<int64_t> rows;
  for (size_t a = 0; a < r.active.size(); ++a) {
    const auto& toks = r.tokens_of[size_t(r.active[a])];
    Batch& b = batches[a];
    b.x.resize(toks.size() * size_t(H));
    for (size_t i = 0; i < toks.size(); ++i) std::memcpy(&b.x[i * size_t(H)], x + toks[i] * H, size_t(H) * sizeof(float));
    mlps.push_back(&w.experts[size_t(r.active[a])]);
    rows.push_back(int64_t(toks.size()));
  }
  if (w.has_shared) {  // reads x in place
    mlps.push_back(&w.shared);
    rows.push_back(T);
  }
  std::vector<kernels::MatmulJob> jobs;
  for (size_t i = 0; i < mlps.size(); ++i) {
    Batch& b = batches[i];
    const int64_t I = mlps[i]->gate.rows;
    b.g.resize(size_t(rows[i] * I));
    b.u.resize(size_t(rows[i] * I));
    const float* in = i < r.active.size() ? b.x.data() : x;
    jobs.push_back({in, rows[i], &mlps[i]->gate, b.g.data()});
    jobs.push_back({in, rows[i], &mlps[i]->up, b.u.data()});
  }
  kernels::matmul_grouped(pool, jobs.data(), jobs.size());
  jobs.clear();
  for (size_t i = 0; i < mlps.size(); ++i) {
    Batch& b = batches[i];
    act.apply(b.g.data(), b.u.data(), b.g.data(), int64_t(b.g.size()));
    b.y.resize(size_t(rows[i] * H));
    jobs.push_back({b.g.data(), rows[i], &mlps[i]->down, b.y.data()});
  }
  kernels::matmul_grouped(pool, jobs.data(), jobs.size());
  return batches;
}
}  // namespace

void moe_forward(ThreadPool& pool, const MoeWeights& w, const MoeRouting& routing, const GatedActivation& act, const float* x,
                 int64_t T, float* out, FfnStats* stats) {
  const int E = int(w.experts.size()), K = routing.top_k;
  const int64_t H = w.router.cols;
  const Routed r = route_all(pool, w, routing, x, T);
  const std::vector<Batch> batches = run_experts(pool, w, r, act, x, T);
  // Combine per token in routing order, so a token's output never depends on its batch.
  std::vector<int> slot_of(static_cast<size_t>(E), -1);
  for (size_t a = 0; a < r.active.size(); ++a) slot_of[size_t(r.active[a])] = int(a);
  std::vector<size_t> next_row(r.active.size(), 0);
  std::vector<const float*> expert_row(size_t(T) * size_t(K));
  for (int64_t t = 0; t < T; ++t)  // tokens were appended to each expert in token order
    for (int j = 0; j < K; ++j) {
      const int a = slot_of[size_t(r.choices[size_t(t * K + j)].expert)];
      expert_row[size_t(t * K + j)] = &batches[size_t(a)].y[next_row[size_t(a)]++ * size_t(H)];
    }
  for (int64_t t = 0; t < T; ++t) {
    float* o = out + t * H;
    std::fill(o, o + H, 0.0f);
    for (int j = 0; j < K; ++j) kernels::axpy(r.choices[size_t(t * K + j)].weight, expert_row[size_t(t * K + j)], o, H);
    kernels::scale(o, routing.routed_scaling, H);
    if (w.has_shared) kernels::add(o, &batches.back().y[size_t(t * H)], H);
  }
  if (stats) {
    stats->weight_bytes += w.router.nbytes() + (w.has_shared ? w.shared.nbytes() : 0);
    for (int e : r.active) stats->weight_bytes += w.experts[size_t(e)].nbytes();
    stats->experts_touched += int64_t(r.active.size());
  }
}

}  // namespace eaglet
