#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "core/aligned_bytes.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/bf16_pairs.h"
#include "kernels/ggml_interleave.h"
#include "kernels/ggml_quant.h"
#include "kernels/isa_table.h"
#include "kernels/ops.h"
#include "kernels/pack.h"

namespace eaglet::kernels {

namespace {
// EAGLET_ISA=amx-model runs the tile model (any CPU; slow): the AMX path end to end, for tests.
// Read at the first use (not at static initialisation, before main() has set up the log).
const IsaTable* env_table() {
  static const IsaTable* t = [] {
    const char* env = std::getenv("EAGLET_ISA");
    return env && std::string_view(env) == "amx-model" ? &tile_model_table() : nullptr;
  }();
  return t;
}
std::atomic<const IsaTable*> g_override{nullptr};
}  // namespace

void set_table_override(const IsaTable* t) { g_override.store(t); }

const GgmlKernel& IsaTable::ggml(QuantScheme q) const {
  switch (q) {
    case QuantScheme::Q8_0: return q8_0;
    case QuantScheme::Q4_0: return q4_0;
    case QuantScheme::Q4_K: return q4_k;
    case QuantScheme::Q6_K: return q6_k;
    default: fail("internal: scheme {} is not a GGUF block type", int(q));
  }
}

const IsaTable& table_for(Isa isa) {
  switch (isa) {
    case Isa::Amx: return amx_table();
    case Isa::Avx512Bf16: return avx512bf16_table();
    case Isa::Avx512: return avx512_table();
    case Isa::Avx2: return avx2_table();
    case Isa::Scalar: break;
  }
  return scalar_table();
}

const IsaTable& active_table() {
  if (const IsaTable* t = g_override.load(std::memory_order_relaxed)) return *t;
  if (const IsaTable* t = env_table()) return *t;
  return table_for(active_isa());
}

namespace {

// The activation copies a matmul makes (BF16 rows, int8 blocks) live in buffers of the calling
// thread, grown to the largest call and then reused: a decode step makes hundreds of matmul calls,
// and the engine thread runs them all. Slot j serves the j-th matmul of one grouped call.
struct alignas(64) CacheLine {
  unsigned char bytes[64];
};

template <class T>
T* activation_buffer(size_t slot, size_t n) {
  // Cache-line aligned, as packed weights are: activation tiles load 64-byte rows too.
  thread_local std::vector<std::vector<T, CacheLineAllocator<T>>> buffers;
  if (buffers.size() <= slot) buffers.resize(slot + 1);
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

// x [M, K] quantised per block of 32, in rows padded with zero blocks to a multiple of 16: the
// AMX kernels load activation tiles of 16 rows whatever M.
const ActBlockQ8* quantized_activations(const IsaTable& t, const float* x, int64_t M, int64_t K, size_t slot) {
  const int64_t blocks = M * K / 32, padded = (M + 15) / 16 * 16 * K / 32;
  ActBlockQ8* xq = activation_buffer<ActBlockQ8>(slot, size_t(padded));
  t.quantize_act(x, M, K, xq);
  std::fill(xq + blocks, xq + padded, ActBlockQ8{});
  return xq;
}

// One matmul ready to run on any range of output columns: activations already rounded to BF16
// when the weights are BF16 or FP8 and the CPU multiplies BF16 pairs, or quantised per block for GGUF
// block weights. `same_x`, a matmul prepared earlier on the same activations, lends its copy.
class PreparedMatmul {
 public:
  PreparedMatmul(const IsaTable& t, const float* x, int64_t M, const WeightView& w, float* y, size_t slot = 0,
                 const PreparedMatmul* same_x = nullptr)
      : t_(t), x_(x), M_(M), w_(w), y_(y) {
    const bool shared = same_x && same_x->x_ == x && same_x->M_ == M && same_x->w_.cols == w.cols;
    pairs_ = w.layout == Layout::Bf16Pairs16 || w.layout == Layout::Fp8Pairs16;
    bf16_dot_ = !pairs_ && w.dtype == DType::BF16 && t.matmul_bf16_bf16;
    if (pairs_ || bf16_dot_) {  // BF16 activations (the pairs kernels read them zero-padded)
      if (shared && same_x->pairs_ == pairs_ && same_x->bf16_dot_ == bf16_dot_) {
        xb_ = same_x->xb_;
      } else {
        bf16_t* xb = activation_buffer<bf16_t>(
            slot, pairs_ ? bf16_pairs_activation_count(M, w.cols) : size_t(M * w.cols));
        if (pairs_) bf16_pairs_activations(x, M, w.cols, xb, t.to_bf16);
        else t.to_bf16(x, M * w.cols, xb);
        xb_ = xb;
      }
    }
    if (is_ggml_blocks(w.quant)) {
      ggml_ = &t.ggml(w.quant);
      EAGLET_CHECK(w.layout == ggml_->layout,
                   "internal: a GGUF block matrix laid out for other kernels than {}'s (pack it for the active table)",
                   ggml_->name);
      EAGLET_CHECK(w.cols % ggml_block_weights(w.quant) == 0, "GGUF block matmul needs K ({}) a multiple of {}",
                   w.cols, ggml_block_weights(w.quant));
      if (shared && is_ggml_blocks(same_x->w_.quant)) xq_ = same_x->xq_;
      else xq_ = quantized_activations(t, x, M, w.cols, slot);
      const GgmlActTiles& a = ggml_->act_tiles;
      if (a.fn && M >= a.min_rows) {
        if (shared && same_x->act_tiles_ && same_x->ggml_->act_tiles.prepare == a.prepare) {
          act_tiles_ = same_x->act_tiles_;
        } else {
          auto* tiles = activation_buffer<CacheLine>(slot, (a.bytes(M, w.cols) + sizeof(CacheLine) - 1) / sizeof(CacheLine));
          a.prepare(xq_, M, w.cols, tiles);
          act_tiles_ = tiles;
        }
      }
    }
    if (w.dtype == DType::F8_E4M3)
      EAGLET_CHECK(w.quant != QuantScheme::None && w.cols % kMxGroup == 0,
                   "FP8 matmul needs block scales and K ({}) a multiple of {}", w.cols, kMxGroup);
  }

  void run(int64_t n0, int64_t n1, const float* bias) const {
    const int64_t K = w_.cols, N = w_.rows;
    if (ggml_) {
      EAGLET_CHECK(n0 % row_group(w_.layout) == 0, "internal: GGUF block matmul split at row {}, inside a row group", n0);
      if (act_tiles_) ggml_->act_tiles.fn(act_tiles_, M_, K, w_.data, n0, n1, y_, N);
      else ggml_->fn(xq_, M_, K, w_.data, n0, n1, y_, N);
    }
    else if (pairs_) {
      if (w_.layout == Layout::Fp8Pairs16) t_.matmul_fp8_pairs(xb_, M_, K, w_.data, w_.fp8_scales(), n0, n1, y_, N);
      else t_.matmul_bf16_pairs(xb_, M_, K, w_.data, n0, n1, y_, N);
    }
    else switch (w_.dtype) {
      case DType::F32: t_.matmul_f32(x_, M_, K, static_cast<const float*>(w_.data), n0, n1, y_, N); break;
      case DType::BF16:
        if (bf16_dot_) t_.matmul_bf16_bf16(xb_, M_, K, static_cast<const bf16_t*>(w_.data), n0, n1, y_, N);
        else t_.matmul_bf16(x_, M_, K, static_cast<const bf16_t*>(w_.data), n0, n1, y_, N);
        break;
      case DType::F8_E4M3:
        t_.matmul_fp8(x_, M_, K, static_cast<const uint8_t*>(w_.data), w_.fp8_scales(), n0, n1, y_, N);
        break;
      default: fail("matmul: unsupported weight dtype {}", dtype_name(w_.dtype));
    }
    if (bias)
      for (int64_t m = 0; m < M_; ++m)
        for (int64_t n = n0; n < n1; ++n) y_[m * N + n] += bias[n];
  }

 private:
  const IsaTable& t_;
  const float* x_;
  int64_t M_;
  const WeightView& w_;
  float* y_;
  bool pairs_ = false, bf16_dot_ = false;
  const GgmlKernel* ggml_ = nullptr;
  const bf16_t* xb_ = nullptr;      // BF16 activations (pairs: padded), in an activation buffer
  const ActBlockQ8* xq_ = nullptr;  // int8 blocks for GGUF weights
  const void* act_tiles_ = nullptr;  // xq_ as the kernel's activation tiles (GgmlActTiles), if it reads them
};

// A multiple of the GGUF kernels' row groups (8, 16) and of the pairs layout's 16-row blocks, so no
// thread's range starts inside one.
constexpr int64_t kRowGrain = 16;

}  // namespace

void matmul(ThreadPool& pool, const float* x, int64_t M, const WeightView& w, float* y, const float* bias) {
  PreparedMatmul mm(active_table(), x, M, w, y);
  if (M * w.rows * w.cols < kMinParallelMacs) return mm.run(0, w.rows, bias);
  pool.parallel_for(w.rows, [&](int64_t n0, int64_t n1, int) { mm.run(n0, n1, bias); }, kRowGrain);
}

void matmul_grouped(ThreadPool& pool, const MatmulJob* jobs, size_t num_jobs) {
  std::vector<PreparedMatmul> prepared;
  prepared.reserve(num_jobs);
  // Each job's rows are padded to the grain so a thread's chunk never straddles two jobs mid-tile.
  std::vector<int64_t> start(num_jobs + 1, 0);
  int64_t macs = 0;
  for (size_t j = 0; j < num_jobs; ++j) {
    prepared.emplace_back(active_table(), jobs[j].x, jobs[j].M, *jobs[j].w, jobs[j].y, j,
                          j > 0 ? &prepared[j - 1] : nullptr);
    start[j + 1] = start[j] + (jobs[j].w->rows + kRowGrain - 1) / kRowGrain * kRowGrain;
    macs += jobs[j].M * jobs[j].w->rows * jobs[j].w->cols;
  }
  if (macs < kMinParallelMacs) {
    for (size_t j = 0; j < num_jobs; ++j)
      if (jobs[j].M > 0) prepared[j].run(0, jobs[j].w->rows, nullptr);
    return;
  }
  pool.parallel_for(
      start[num_jobs],
      [&](int64_t b, int64_t e, int) {
        size_t j = size_t(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
        for (; j < num_jobs && start[j] < e; ++j) {
          const int64_t n0 = std::max(b, start[j]) - start[j];
          const int64_t n1 = std::min({e, start[j + 1]}) - start[j];
          const int64_t rows = jobs[j].w->rows;
          if (jobs[j].M > 0 && n0 < std::min(n1, rows)) prepared[j].run(n0, std::min(n1, rows), nullptr);
        }
      },
      kRowGrain);
}

void matmul_gated(ThreadPool& pool, const float* x, int64_t M, const WeightView& gate, const WeightView& up,
                  float* out, float* up_out, const GatedActivationFn& act) {
  EAGLET_CHECK(gate.rows == up.rows && gate.cols == up.cols, "gate [{}, {}] and up [{}, {}] projections differ in shape",
               gate.rows, gate.cols, up.rows, up.cols);
  const IsaTable& t = active_table();
  PreparedMatmul g(t, x, M, gate, out, 0), u(t, x, M, up, up_out, 1, &g);
  const int64_t N = gate.rows;
  auto run = [&](int64_t n0, int64_t n1) {
    g.run(n0, n1, nullptr);
    u.run(n0, n1, nullptr);
    for (int64_t m = 0; m < M; ++m) {
      float* o = out + m * N + n0;
      if (act) act(o, up_out + m * N + n0, o, n1 - n0);
      else t.silu_mul(o, up_out + m * N + n0, o, n1 - n0);
    }
  };
  if (2 * M * N * gate.cols < kMinParallelMacs) return run(0, N);
  pool.parallel_for(N, [&](int64_t n0, int64_t n1, int) { run(n0, n1); }, kRowGrain);
}

float dot(const float* a, const float* b, int64_t n) { return active_table().dot(a, b, n); }
void axpy(float a, const float* x, float* y, int64_t n) { active_table().axpy(a, x, y, n); }
void dot_rows(const float* q, const float* rows, int64_t stride, int64_t n, int64_t dim, float scale, float* out) {
  active_table().dot_rows(q, rows, stride, n, dim, scale, out);
}
void axpy_rows(const float* w, const float* rows, int64_t stride, int64_t n, int64_t dim, float* out) {
  active_table().axpy_rows(w, rows, stride, n, dim, out);
}

void scale(float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  active_table().rmsnorm(x, w, eps, out, n);
}

void rmsnorm_rows(const float* x, int64_t rows, int64_t n, const float* w, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) rmsnorm(x + r * n, w, eps, out + r * n, n);
}

void embedding_rows(const WeightView& table, const int* ids, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    EAGLET_CHECK(ids[i] >= 0 && ids[i] < table.rows, "token id {} is outside the vocabulary (size {})", ids[i],
                 table.rows);
    read_row(table, ids[i], out + i * table.cols);
  }
}

void silu_mul(const float* g, const float* u, float* out, int64_t n) {
  active_table().silu_mul(g, u, out, n);
}

void softmax(float* x, int64_t n) { active_table().softmax(x, n); }

void rope_neox(float* head, const float* cos, const float* sin, int64_t rot_dim) {
  const int64_t half = rot_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

void to_f32(DType dt, const void* src, float* dst, int64_t n) {
  switch (dt) {
    case DType::F32:
      std::copy_n(static_cast<const float*>(src), n, dst);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const bf16_t*>(src)[i]);
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const f16_t*>(src)[i]);
      return;
    default:
      fail("to_f32: unsupported dtype {}", dtype_name(dt));
  }
}

}  // namespace eaglet::kernels
