#include "train/torch_threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

namespace eaglet {
namespace {
template <class Fn>
Fn openblas(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}
}  // namespace

void set_torch_threads(int n) {
  torch::set_num_threads(n);
  if (auto set = openblas<void (*)(int)>("openblas_set_num_threads")) set(n);
}

int blas_threads() {
  auto get = openblas<int (*)()>("openblas_get_num_threads");
  return get ? get() : 0;
}

}  // namespace eaglet
