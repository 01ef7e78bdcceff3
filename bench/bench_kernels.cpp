// Google Benchmark for the hot kernels. Matvec throughput is reported as bytes of weights read
// per second (decode is bound by it); run e.g.
//   ./build/bench/eaglet_bench_kernels --benchmark_filter=Matvec
// and compare with `eaglet bench`'s same-run memory bandwidth figure.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <utility>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/memory_bandwidth.h"
#include "io/mapped_file.h"
#include "core/thread_pool.h"
#include "kernels/ggml_interleave.h"
#include "core/aligned_bytes.h"
#include "kernels/ops.h"
#include "kernels/isa_table.h"
#include "kernels/pack.h"

namespace {

using namespace eaglet;

// Weights start on pages, and from 2 MiB on huge pages, as the engine places them
// (io/mapped_file.h, core/aligned_bytes.h): from a plain heap block (16 bytes past a page, 4 KB
// pages) the same kernel streams 5-20% slower on this project's VMs.
template <class T>
using PageVector = std::vector<T, AlignedAllocator<T, kWeightAlignment>>;

// A weight set much larger than the caches, split into TinyLlama-sized matrices, so every call
// streams from memory like a decode step does.
struct WeightSet {
  DType dtype;
  int64_t rows, cols, count;
  PageVector<uint16_t> bf16;
  PageVector<float> f32;
  WeightSet(DType dt, int64_t r, int64_t c, int64_t n) : dtype(dt), rows(r), cols(c), count(n) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> d(0, 0xFFFF);
    if (dt == DType::BF16) {
      bf16.resize(size_t(r * c * n));
      for (auto& v : bf16) v = uint16_t(0x3C00 | (d(rng) & 0x83FF));  // small finite values
    } else {
      f32.assign(size_t(r * c * n), 0.01f);
    }
  }
  kernels::WeightView view(int64_t i) const {
    const void* p = dtype == DType::BF16 ? static_cast<const void*>(bf16.data() + i * rows * cols)
                                         : static_cast<const void*>(f32.data() + i * rows * cols);
    return {dtype, p, rows, cols};
  }
};

// One pool per thread count, kept for the whole run (starting threads is not what is measured).
ThreadPool& pool_of(int64_t threads) {
  static std::map<int64_t, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(int(threads));
  return *p;
}

// Runs one benchmark on the given ISA, restoring the ISA afterwards.
class IsaScope {
 public:
  IsaScope(benchmark::State& state, Isa isa) : saved_(active_isa()) {
    set_active_isa(isa);
    ok_ = active_isa() == isa;
    if (!ok_) state.SkipWithError("ISA not supported on this CPU");
  }
  ~IsaScope() { set_active_isa(saved_); }
  bool ok() const { return ok_; }

 private:
  Isa saved_;
  bool ok_ = false;
};

void run_matmul(benchmark::State& state, DType dt, Isa isa) {
  const int64_t M = state.range(0), threads = state.range(1);
  IsaScope scope(state, isa);
  ThreadPool& pool = pool_of(threads);
  if (!scope.ok()) return;
  static WeightSet* sets[2] = {nullptr, nullptr};
  WeightSet*& ws = sets[dt == DType::BF16];
  if (!ws) ws = new WeightSet(dt, 5632, 2048, dt == DType::BF16 ? 24 : 12);  // ~550 MB
  std::vector<float> x(size_t(M * ws->cols), 0.5f), y(size_t(M * ws->rows));
  int64_t i = 0;
  for (auto _ : state) {
    kernels::matmul(pool, x.data(), M, ws->view(i++ % ws->count), y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * ws->view(0).nbytes());
  state.counters["GFLOP/s"] = benchmark::Counter(double(state.iterations()) * 2.0 * M * ws->rows * ws->cols / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int m : {1, 2, 4, 8, 12, 16, 32, 64}) b->Args({m, t});
  b->UseRealTime()->ArgNames({"M", "threads"});
}

// `count` BF16 matrices [rows, cols] packed as the active table packs them (AMX: the pairs
// layout), so a kernel that reads a packed layout is measured on the bytes the engine gives it;
// made once per key and kept for the benchmarks after.
template <class Key>
const std::vector<kernels::PackedWeight>& packed_set(Key key, int64_t rows, int64_t cols, int64_t count) {
  static std::map<Key, std::vector<kernels::PackedWeight>> sets;
  auto& packed = sets[key];
  if (packed.empty()) {
    const WeightSet ws(DType::BF16, rows, cols, count);
    for (int64_t i = 0; i < ws.count; ++i) packed.push_back(kernels::pack(ws.view(i)));
  }
  return packed;
}

// M rows against one matrix of the set after another (each call streams from memory): bytes/s
// of weights, GFLOP/s, and the kernel that ran as the label.
void time_packed(benchmark::State& state, ThreadPool& pool, const std::vector<kernels::PackedWeight>& packed, int64_t M) {
  const int64_t rows = packed[0].view.rows, cols = packed[0].view.cols;
  std::vector<float> x(size_t(M * cols), 0.5f), y(size_t(M * rows));
  size_t i = 0;
  for (auto _ : state) {
    kernels::matmul(pool, x.data(), M, packed[i++ % packed.size()].view, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(kernels::kernel_name(packed[0].view, kernels::active_table()));
  state.SetBytesProcessed(int64_t(state.iterations()) * packed[0].view.nbytes());
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * M * rows * cols / 1e9, benchmark::Counter::kIsRate);
}

void run_matmul_packed(benchmark::State& state, Isa isa) {
  IsaScope scope(state, isa);
  ThreadPool& pool = pool_of(state.range(1));
  if (!scope.ok()) return;
  time_packed(state, pool, packed_set(isa, 5632, 2048, 24), state.range(0));  // ~550 MB
}

BENCHMARK_CAPTURE(run_matmul_packed, Bf16_amx, Isa::Amx)->Apply(args);
BENCHMARK_CAPTURE(run_matmul_packed, Bf16_avx512bf16, Isa::Avx512Bf16)->Apply(args);
// Row-major BF16 as the checkpoint has it (the avx2 / avx512 tables read it; avx512bf16 and amx pack
// to pairs, above): the vdpbf16ps row kernel for comparison.
BENCHMARK_CAPTURE(run_matmul, Bf16_avx512bf16_rowmajor, DType::BF16, Isa::Avx512Bf16)->Apply(args);
BENCHMARK_CAPTURE(run_matmul, Bf16_avx512, DType::BF16, Isa::Avx512)->Apply(args);
BENCHMARK_CAPTURE(run_matmul, Bf16_avx2, DType::BF16, Isa::Avx2)->Apply(args);
BENCHMARK_CAPTURE(run_matmul, F32_avx512, DType::F32, Isa::Avx512)->Apply(args);
BENCHMARK_CAPTURE(run_matmul, Bf16_scalar, DType::BF16, Isa::Scalar)->Args({1, 1})->UseRealTime();

// Each matrix shape of the widened TinyLlama target (q/k/v rows together, o, one of gate / up,
// down), ~275 MB of each packed as the active table packs it, at decode (M = 1) and verification
// sizes: c(M)/c(1) per shape shows which matrix a model's cost curve owes its steps to.
void run_model_shape(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const auto& packed = packed_set(std::pair(rows, cols), rows, cols, (int64_t(275) << 20) / (rows * cols));
  time_packed(state, pool_of(state.range(3)), packed, state.range(2));
}
BENCHMARK(run_model_shape)
    ->ArgsProduct({{2560}, {2048}, {1, 12, 16, 32}, {1, 2}})
    ->ArgsProduct({{2048}, {2048}, {1, 12, 16, 32}, {1, 2}})
    ->ArgsProduct({{5632}, {2048}, {1, 12, 16, 32}, {1, 2}})
    ->ArgsProduct({{2048}, {5632}, {1, 12, 16, 32}, {1, 2}})
    ->ArgNames({"rows", "cols", "M", "threads"})
    ->UseRealTime();

// The same probe `eaglet bench` reports (best of one- and four-stream reads with the widest
// loads), so the matvec rows above can be read as a fraction of it.
void BM_MemoryRead(benchmark::State& state) {
  ThreadPool& pool = pool_of(state.range(0));
  double gbps = 0;
  for (auto _ : state) gbps = std::max(gbps, measure_memory_bandwidth(pool, 512, 3).read_gbps);
  state.counters["read_GB/s"] = gbps;
}
BENCHMARK(BM_MemoryRead)->Arg(1)->Arg(2)->ArgName("threads")->Iterations(1)->UseRealTime();

void BM_Dot(benchmark::State& state) {
  std::vector<float> a(size_t(state.range(0)), 1.0f), b(size_t(state.range(0)), 2.0f);
  for (auto _ : state) benchmark::DoNotOptimize(kernels::dot(a.data(), b.data(), state.range(0)));
}
BENCHMARK(BM_Dot)->Arg(64)->Arg(128);


// MXFP8 experts of the M3-shaped synthetic model (1024 x 2048 e4m3 + E8M0 scales), ~270 MB,
// packed as each ISA's table packs them (AMX and AVX-512 BF16 with VBMI: the FP8 pairs layout;
// the other vector kernels read them as the file has them). The label names the kernel that ran.
void run_mxfp8(benchmark::State& state, Isa isa) {
  const int64_t M = state.range(0), threads = state.range(1), N = 1024, K = 2048, count = 128;
  IsaScope scope(state, isa);
  ThreadPool& pool = pool_of(threads);
  if (!scope.ok()) return;
  static PageVector<uint8_t> codes, scales;
  if (codes.empty()) {
    std::mt19937 rng(1);
    codes.resize(size_t(N * K * count));
    for (auto& c : codes) c = uint8_t((rng() & 0x87) | 0x30);
    scales.assign(size_t(N * K / 32 * count), 120);
  }
  static std::map<Isa, std::vector<kernels::PackedWeight>> sets;
  auto& experts = sets[isa];
  if (experts.empty())
    for (int64_t e = 0; e < count; ++e) {
      kernels::WeightView v{DType::F8_E4M3, codes.data() + e * N * K, N, K};
      v.quant = kernels::QuantScheme::Mxfp8;
      v.scales = scales.data() + e * N * K / 32;
      v.scale_bytes = size_t(N * K / 32);
      experts.push_back(kernels::pack(v));
    }
  time_packed(state, pool, experts, M);
}
BENCHMARK_CAPTURE(run_mxfp8, Mxfp8_amx, Isa::Amx)->ArgsProduct({{1, 4, 16, 32}, {1, 2}})->UseRealTime();
BENCHMARK_CAPTURE(run_mxfp8, Mxfp8_avx512bf16, Isa::Avx512Bf16)->ArgsProduct({{1, 4, 16, 32}, {1, 2}})->UseRealTime();
BENCHMARK_CAPTURE(run_mxfp8, Mxfp8_avx512, Isa::Avx512)->ArgsProduct({{1, 4, 16}, {1, 2}})->UseRealTime();
BENCHMARK_CAPTURE(run_mxfp8, Mxfp8_avx2, Isa::Avx2)->Args({1, 1})->Args({4, 1})->Args({1, 2})->Args({4, 2})->UseRealTime();

// GGUF block weights of the widened TinyLlama's MLP shape (5632 x 2048), packed as each ISA's
// table packs them (AVX2: 8-row groups; AVX-512 VNNI and AMX INT8: 16-row groups) and copied until
// the set holds ~550 MB, so the stream never fits a cache: decode (M = 1) against the read probe,
// and batches for verification. The label names the kernel that ran.
void run_ggml(benchmark::State& state, kernels::GgmlType type, Isa isa) {
  const int64_t M = state.range(0), N = 5632, K = 2048;
  IsaScope scope(state, isa);
  ThreadPool& pool = pool_of(state.range(1));
  if (!scope.ok()) return;
  struct Set {
    kernels::WeightView view;  // of the first copy
    int64_t bytes_per = 0, count = 0;
    PageVector<uint8_t> bytes;
  };
  static std::map<std::pair<int, Isa>, Set> sets;
  Set& set = sets[{int(type), isa}];
  if (set.bytes.empty()) {
    std::mt19937 rng(1);
    const kernels::GgmlTypeInfo* info = kernels::ggml_type_info(uint32_t(type));
    std::vector<uint8_t> blocks(kernels::ggml_row_bytes(type, K) * size_t(N));
    for (auto& b : blocks) b = uint8_t(rng());
    // Sane half-precision scales (0.01) where each block keeps them.
    const size_t at = type == kernels::GgmlType::Q6_K ? 208 : 0, n = type == kernels::GgmlType::Q4_K ? 2 : 1;
    for (size_t i = 0; i < blocks.size(); i += info->block_bytes)
      for (size_t j = 0; j < n; ++j) blocks[i + at + 2 * j] = 0x1f, blocks[i + at + 2 * j + 1] = 0x21;
    const kernels::PackedWeight one =
        kernels::pack({DType::U8, blocks.data(), N, K, kernels::interleaved_scheme(type)});
    set.bytes_per = int64_t(one.view.nbytes());
    set.count = std::max<int64_t>(1, (int64_t(550) << 20) / set.bytes_per);
    set.bytes.resize(size_t(set.bytes_per * set.count));
    const auto* src = static_cast<const uint8_t*>(one.view.data);
    for (int64_t c = 0; c < set.count; ++c) std::copy(src, src + set.bytes_per, set.bytes.begin() + c * set.bytes_per);
    set.view = one.view;
  }
  std::vector<float> x(size_t(M * K), 0.5f), y(size_t(M * N));
  int64_t i = 0;
  for (auto _ : state) {
    kernels::WeightView v = set.view;
    v.data = set.bytes.data() + (i++ % set.count) * set.bytes_per;
    kernels::matmul(pool, x.data(), M, v, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(kernels::kernel_name(set.view, kernels::active_table()));
  state.SetBytesProcessed(int64_t(state.iterations()) * set.bytes_per);
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * M * N * K / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(run_ggml, Q8_0_amx, kernels::GgmlType::Q8_0, Isa::Amx)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q8_0_avx512, kernels::GgmlType::Q8_0, Isa::Avx512)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q8_0_avx2, kernels::GgmlType::Q8_0, Isa::Avx2)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q4_0_amx, kernels::GgmlType::Q4_0, Isa::Amx)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q4_0_avx512, kernels::GgmlType::Q4_0, Isa::Avx512)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q4_0_avx2, kernels::GgmlType::Q4_0, Isa::Avx2)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q4_K_avx2, kernels::GgmlType::Q4_K, Isa::Avx2)->Apply(args);
BENCHMARK_CAPTURE(run_ggml, Q6_K_avx2, kernels::GgmlType::Q6_K, Isa::Avx2)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
