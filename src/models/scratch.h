// Activation buffers a model reuses from one forward to the next (gemma.cpp's Activations, sized
// lazily because the number of tokens changes step to step: 1 for decode, k+1 or a tree for
// verification, a chunk for prefill). Each buffer grows to the largest batch seen and is neither
// freed nor cleared between forwards, so a warm decode or verification loop allocates nothing for
// activations; every op writes its part of a buffer before anything reads it.
//
// Forwards of one model may run concurrently (the trainer's inference workers share the target),
// so a model keeps a ScratchPool: each forward leases a whole set of buffers and returns it.
// One engine thread, the usual case, only ever uses one set.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace eaglet {

class ScratchBuffer {
 public:
  // At least n floats; contents are whatever the previous forward left.
  float* get(int64_t n) {
    if (buf_.size() < size_t(n)) buf_.resize(size_t(n));
    return buf_.data();
  }

 private:
  std::vector<float> buf_;
};

template <class Set>
class ScratchPool {
 public:
  class Lease {
   public:
    Lease(ScratchPool& pool, std::unique_ptr<Set> set) : pool_(pool), set_(std::move(set)) {}
    ~Lease() { pool_.give_back(std::move(set_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Set& operator*() { return *set_; }
    Set* operator->() { return set_.get(); }

   private:
    ScratchPool& pool_;
    std::unique_ptr<Set> set_;
  };

  // A set no other forward holds: a returned one when there is one, else a new one.
  Lease lease() {
    std::lock_guard<std::mutex> lk(mu_);
    if (free_.empty()) return Lease(*this, std::make_unique<Set>());
    std::unique_ptr<Set> s = std::move(free_.back());
    free_.pop_back();
    return Lease(*this, std::move(s));
  }

 private:
  void give_back(std::unique_ptr<Set> s) {
    std::lock_guard<std::mutex> lk(mu_);
    free_.push_back(std::move(s));
  }
  std::mutex mu_;
  std::vector<std::unique_ptr<Set>> free_;
};

}  // namespace eaglet
