// How many threads the trainer's tensor arithmetic uses: libtorch's intra-op pool and the BLAS
// under it. Debian's libtorch multiplies through OpenBLAS (libblas.so.3 -> openblas-pthread),
// whose worker threads at::set_num_threads does not reach: an online trainer told to use one
// thread still ran an OpenBLAS helper that shared its products and spun (sched_yield) between
// them on the serving engine's core. Under saturated load that cost the engine ~4% tok/s and the
// trainer half its steps (docs/online-training.md).
#pragma once

namespace eaglet {

// Sets both; the BLAS part only where the BLAS is OpenBLAS (found by symbol at run time, so other
// BLAS libraries link and run as before). Process-wide, as both settings are.
void set_torch_threads(int n);
// OpenBLAS's thread count, or 0 when the BLAS in this process is not OpenBLAS.
int blas_threads();

}  // namespace eaglet
