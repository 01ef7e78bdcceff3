#include "train/distributed.h"

#ifndef USE_C10D_GLOO  // Debian's libtorch is built with Gloo; its header is guarded by this macro
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.h"

namespace eaglet {

namespace {
using namespace std::chrono_literals;

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  EAGLET_CHECK(end && *end == '\0' && x >= lo && x <= hi, "environment: {}='{}' is not an integer in [{}, {}]", name, v,
               lo, hi);
  return int(x);
}

std::string key_of(const char* kind, int rank) { return fmt::format("eaglet/{}/{}", kind, rank); }

int64_t as_int(const std::vector<uint8_t>& v) { return std::stoll(std::string(v.begin(), v.end())); }
std::vector<uint8_t> bytes_of(int64_t x) {
  const std::string s = std::to_string(x);
  return {s.begin(), s.end()};
}
}  // namespace

DistEnv DistEnv::from_environment() {
  DistEnv e;
  e.world = env_int("WORLD_SIZE", 1, 1, 1 << 16);
  e.rank = env_int("RANK", 0, 0, e.world - 1);
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0, e.world - 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  e.master_port = env_int("MASTER_PORT", e.master_port, 1, 65535);
  return e;
}

// Heartbeats go through their own store connection (a TCPStore client is not meant to be shared
// between threads): each rank bumps "eaglet/alive/<rank>" every 500 ms; when a collective fails,
// a rank whose counter stopped is the one that died (or froze entirely).
struct ProcessGroup::Impl {
  DistEnv env;
  std::chrono::seconds timeout;
  c10::intrusive_ptr<c10d::TCPStore> store, beat_store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::thread beat;
  std::atomic<bool> stop{false};

  static c10::intrusive_ptr<c10d::TCPStore> connect(const DistEnv& env, bool server, std::chrono::seconds timeout) {
    c10d::TCPStoreOptions o;
    o.port = uint16_t(env.master_port);
    o.isServer = server;
    if (server) o.numWorkers = size_t(env.world);
    o.waitWorkers = false;
    o.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  }

  void heartbeat() {
    int64_t n = 0;
    while (!stop.load()) {
      try {
        beat_store->set(key_of("alive", env.rank), bytes_of(++n));
      } catch (const std::exception&) {
        return;  // the store is gone (rank 0 died): the next collective reports it
      }
      for (int i = 0; i < 5 && !stop.load(); ++i) std::this_thread::sleep_for(100ms);
    }
  }

  // Counters of every rank (-1: unreadable), through the calling thread's connection (never the
  // heartbeat's). Throws when the store itself is unreachable.
  std::vector<int64_t> read(const char* kind) const {
    std::vector<int64_t> out(size_t(env.world), -1);
    for (int r = 0; r < env.world; ++r) {
      const std::string k = key_of(kind, r);
      if (store->check({k})) out[size_t(r)] = as_int(store->get(k));
    }
    return out;
  }
};

ProcessGroup::ProcessGroup(const DistEnv& env, std::chrono::seconds timeout) : impl_(std::make_unique<Impl>()) {
  impl_->env = env;
  impl_->timeout = timeout;
  try {
    // The rendezvous itself may wait for slow starters (loading the target) far longer than a
    // collective may take.
    const auto join = std::max<std::chrono::seconds>(timeout, 600s);
    impl_->store = Impl::connect(env, env.rank == 0, join);
    impl_->beat_store = Impl::connect(env, false, timeout);
    auto opts = c10d::ProcessGroupGloo::Options::create(std::chrono::milliseconds(timeout));
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr));
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", impl_->store);
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, env.rank, env.world, opts);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("rank {}: rendezvous with {} ranks at {}:{} failed: {}", env.rank, env.world, env.master_addr,
         env.master_port, e.what());
  }
  impl_->beat = std::thread([this] { impl_->heartbeat(); });
  spdlog::info("rank {} of {} joined ({}:{}, gloo, collective timeout {}s)", env.rank, env.world, env.master_addr,
               env.master_port, timeout.count());
}

ProcessGroup::~ProcessGroup() {
  impl_->stop = true;
  if (impl_->beat.joinable()) impl_->beat.join();
}

int ProcessGroup::rank() const { return impl_->env.rank; }
int ProcessGroup::world() const { return impl_->env.world; }

std::string ProcessGroup::diagnose(const std::string& what) const {
  const int me = impl_->env.rank;
  try {
    const auto a = impl_->read("alive");
    std::this_thread::sleep_for(1500ms);
    const auto b = impl_->read("alive");
    const auto steps = impl_->read("step");
    std::vector<int> dead, behind;
    for (int r = 0; r < impl_->env.world; ++r) {
      if (r == me) continue;
      if (b[size_t(r)] == a[size_t(r)]) dead.push_back(r);
      else if (steps[size_t(r)] < steps[size_t(me)]) behind.push_back(r);
    }
    if (!dead.empty())
      return fmt::format("rank {}: lost rank {} (no heartbeat: it died or froze) during {}", me, fmt::join(dead, ", "),
                         what);
    if (!behind.empty())
      return fmt::format("rank {}: rank {} did not reach step {} within {}s (alive but stuck) during {}", me,
                         fmt::join(behind, ", "), steps[size_t(me)], impl_->timeout.count(), what);
    return fmt::format("rank {}: a collective failed during {}", me, what);
  } catch (const std::exception&) {
    return fmt::format("rank {}: lost rank 0 (its TCPStore at {}:{} is gone) during {}", me, impl_->env.master_addr,
                       impl_->env.master_port, what);
  }
}

namespace {
template <class F>
void guarded(const ProcessGroup& pg, const char* what, F&& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    spdlog::debug("{} failed: {}", what, e.what());
    fail("{}", pg.diagnose(what));
  }
}
}  // namespace

void ProcessGroup::all_reduce_sum(torch::Tensor& t) {
  guarded(*this, "all-reduce", [&] {
    std::vector<at::Tensor> v{t};
    impl_->pg->allreduce(v)->wait();
  });
}

void ProcessGroup::broadcast(torch::Tensor& t, int root) {
  guarded(*this, "broadcast", [&] {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    impl_->pg->broadcast(v, o)->wait();
  });
}

void ProcessGroup::publish(const std::string& key) { impl_->store->set("eaglet/" + key, bytes_of(1)); }

void ProcessGroup::wait_for(const std::string& key, std::chrono::seconds timeout) {
  guarded(*this, key.c_str(), [&] { impl_->store->wait({"eaglet/" + key}, timeout); });
}

void ProcessGroup::at_step(int64_t step) { impl_->store->set(key_of("step", impl_->env.rank), bytes_of(step)); }

// ---------------------------------------------------------------------------------------------

struct GradientSync::Impl {
  ProcessGroup* pg = nullptr;
  c10d::ProcessGroupGloo* gloo = nullptr;
  struct Bucket {
    torch::Tensor flat;
    std::vector<int> members;
    std::vector<int64_t> offsets;
    int pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::vector<torch::Tensor> params;
  std::vector<unsigned> hooks;
  std::vector<Bucket> buckets;
  std::vector<int> bucket_of, slot_of;
  std::vector<bool> ready;
  int next_launch = 0;
  std::mutex mu;  // hooks run on autograd's thread

  torch::Tensor slice(int i) {
    const Bucket& b = buckets[size_t(bucket_of[size_t(i)])];
    const torch::Tensor& p = params[size_t(i)];
    return b.flat.narrow(0, b.offsets[size_t(slot_of[size_t(i)])], p.numel()).view(p.sizes());
  }

  // Buckets start strictly in index order, so every rank issues its collectives in the same order
  // (Gloo matches them by sequence) whatever order autograd finishes the gradients in.
  void launch_ready() {
    while (next_launch < int(buckets.size()) && buckets[size_t(next_launch)].pending == 0) {
      Bucket& b = buckets[size_t(next_launch++)];
      std::vector<at::Tensor> v{b.flat};
      b.work = gloo->allreduce(v);
    }
  }

  void on_grad(int i, const torch::Tensor& g) {
    std::lock_guard<std::mutex> lock(mu);
    if (ready[size_t(i)]) return;
    slice(i).copy_(g);
    ready[size_t(i)] = true;
    --buckets[size_t(bucket_of[size_t(i)])].pending;
    launch_ready();
  }
};

GradientSync::GradientSync(ProcessGroup& pg, const std::vector<torch::Tensor>& params, int64_t bucket_bytes)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.pg = &pg;
  s.gloo = pg.impl_->pg.get();
  s.params = params;
  s.bucket_of.assign(params.size(), 0);
  s.slot_of.assign(params.size(), 0);
  s.ready.assign(params.size(), false);
  // Reverse order: backward produces the last layers' gradients first.
  int64_t filled = 0;
  for (int i = int(params.size()) - 1; i >= 0; --i) {
    const int64_t bytes = params[size_t(i)].numel() * 4;
    if (s.buckets.empty() || (filled > 0 && filled + bytes > bucket_bytes)) {
      s.buckets.emplace_back();
      filled = 0;
    }
    auto& b = s.buckets.back();
    s.bucket_of[size_t(i)] = int(s.buckets.size()) - 1;
    s.slot_of[size_t(i)] = int(b.members.size());
    b.offsets.push_back(filled / 4);
    b.members.push_back(i);
    filled += bytes;
  }
  for (auto& b : s.buckets) {
    int64_t n = 0;
    for (int i : b.members) n += params[size_t(i)].numel();
    b.flat = torch::zeros({n}, torch::kFloat32);
    b.pending = int(b.members.size());
  }
  for (size_t i = 0; i < params.size(); ++i)
    s.hooks.push_back(params[i].register_hook([this, i](const torch::Tensor& g) { impl_->on_grad(int(i), g); }));
}

GradientSync::~GradientSync() {
  for (size_t i = 0; i < impl_->hooks.size(); ++i) impl_->params[i].remove_hook(impl_->hooks[i]);
}

int GradientSync::num_buckets() const { return int(impl_->buckets.size()); }

void GradientSync::finish() {
  Impl& s = *impl_;
  {
    // Parameters backward did not reach contribute zeros (or what .grad already holds).
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i < s.params.size(); ++i)
      if (!s.ready[i]) {
        const auto& g = s.params[i].grad();
        if (g.defined()) s.slice(int(i)).copy_(g);
        else s.slice(int(i)).zero_();
        s.ready[i] = true;
        --s.buckets[size_t(s.bucket_of[i])].pending;
      }
    guarded(*s.pg, "gradient all-reduce", [&] {
      s.launch_ready();
      for (auto& b : s.buckets) b.work->wait();
    });
  }
  for (size_t i = 0; i < s.params.size(); ++i) {
    auto& p = s.params[i];
    if (p.grad().defined()) p.mutable_grad().copy_(s.slice(int(i)));
    else p.mutable_grad() = s.slice(int(i)).clone();
  }
  for (auto& b : s.buckets) {
    b.pending = int(b.members.size());
    b.work.reset();
  }
  std::fill(s.ready.begin(), s.ready.end(), false);
  s.next_launch = 0;
}

std::vector<int> zero1_owners(const std::vector<torch::Tensor>& params, int world) {
  std::vector<size_t> order(params.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return params[a].numel() > params[b].numel(); });
  std::vector<int64_t> load(size_t(world), 0);
  std::vector<int> owner(params.size(), 0);
  for (size_t i : order) {
    const int r = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = r;
    load[size_t(r)] += params[i].numel();
  }
  return owner;
}

}  // namespace eaglet
