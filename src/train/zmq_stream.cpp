// The ZeroMQ transport of hidden states (see hidden_stream.h). The trainer binds a ROUTER;
// workers connect DEALERs. Work is pulled: each READY from a worker is one credit; the trainer
// sends WORK (sample ids and mask) only for samples inside the backpressure window, and a worker
// answers with RESULT (the tensors). An in-flight sample whose worker does not answer within the
// timeout is reassigned, so a dead worker costs time, never the run; with no live worker left
// the stream ends with an error instead of hanging.
#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "core/error.h"
#include "train/hidden_stream.h"

namespace eaglet {

namespace {
using clock_type = std::chrono::steady_clock;

template <typename T>
zmq::message_t bytes_of(const std::vector<T>& v) {
  return zmq::message_t(v.data(), v.size() * sizeof(T));
}

template <typename T>
std::vector<T> vector_of(const zmq::message_t& m) {
  std::vector<T> v(m.size() / sizeof(T));
  std::memcpy(v.data(), m.data(), v.size() * sizeof(T));
  return v;
}

std::string text_of(const zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

class ZmqSource : public HiddenSource {
 public:
  ZmqSource(const std::string& endpoint, const std::vector<TrainSample>& samples, const std::vector<int>& aux,
            int hidden, int64_t first, int64_t end, int capacity, int timeout_s)
      : samples_(samples), aux_(aux), hidden_(hidden), buffer_(first, end, capacity), next_assign_(first), end_(end),
        capacity_(capacity), timeout_(timeout_s), socket_(ctx_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(endpoint);
    spdlog::info("hidden-state stream: waiting for `eaglet infer-worker --connect {}`", endpoint);
    io_ = std::thread([this] { loop(); });
  }
  ~ZmqSource() override { stop(); }

  bool take(HiddenSample* out) override {
    if (buffer_.take(out)) return true;
    if (!buffer_.error().empty()) fail("{}", buffer_.error());
    return false;
  }
  StreamStats stats() const override {
    StreamStats s = buffer_.stats();
    s.reassigned = reassigned_;
    return s;
  }
  void stop() override {
    running_ = false;
    if (io_.joinable()) io_.join();
    buffer_.close();
  }

 private:
  struct InFlight {
    std::string worker;
    clock_type::time_point since;
  };

  void send_work(const std::string& worker, int64_t index) {
    const TrainSample& s = samples_[size_t(index)];
    nlohmann::json h = {{"index", index}, {"aux_layers", aux_}};
    socket_.send(zmq::buffer(worker), zmq::send_flags::sndmore);
    socket_.send(zmq::str_buffer("WORK"), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(h.dump()), zmq::send_flags::sndmore);
    socket_.send(bytes_of(s.ids), zmq::send_flags::sndmore);
    socket_.send(bytes_of(s.loss_mask), zmq::send_flags::none);
    inflight_[index] = {worker, clock_type::now()};
  }

  void on_message(std::vector<zmq::message_t>& parts) {
    const std::string worker = text_of(parts[0]);
    const std::string type = parts.size() > 1 ? text_of(parts[1]) : "";
    last_seen_[worker] = clock_type::now();
    if (!live_.count(worker) && !dead_.count(worker)) {
      live_.insert(worker);
      spdlog::info("inference worker connected ({} live)", live_.size());
    }
    if (type == "READY") {
      if (!dead_.count(worker)) credits_.push_back(worker);
    } else if (type == "RESULT" && parts.size() == 7) {
      auto h = nlohmann::json::parse(text_of(parts[2]));
      HiddenSample s;
      s.index = h.at("index").get<int64_t>();
      s.hidden = h.at("hidden").get<int>();
      s.ids = vector_of<int>(parts[3]);
      s.loss_mask = vector_of<uint8_t>(parts[4]);
      s.aux = vector_of<float>(parts[5]);
      s.last = vector_of<float>(parts[6]);
      if (s.hidden != hidden_ || s.aux.size() != s.ids.size() * aux_.size() * size_t(hidden_)) {
        buffer_.close(fmt::format("inference worker sent hidden size {} but the target has {}", s.hidden, hidden_));
        return;
      }
      inflight_.erase(s.index);
      buffer_.put(std::move(s), h.value("seconds", 0.0));
      if (!dead_.count(worker)) credits_.push_back(worker);
    } else if (type == "BYE") {
      drop_worker(worker, "left");
    }
  }

  void drop_worker(const std::string& worker, const char* why) {
    if (!live_.erase(worker)) return;
    dead_.insert(worker);
    credits_.erase(std::remove(credits_.begin(), credits_.end(), worker), credits_.end());
    for (auto it = inflight_.begin(); it != inflight_.end();) {
      if (it->second.worker == worker) {
        reassign_.push_back(it->first);
        ++reassigned_;
        it = inflight_.erase(it);
      } else {
        ++it;
      }
    }
    spdlog::warn("inference worker {} ({} live); its samples are reassigned", why, live_.size());
  }

  void dispatch() {
    while (!credits_.empty()) {
      int64_t index;
      if (!reassign_.empty()) {
        index = reassign_.front();
        reassign_.pop_front();
      } else if (next_assign_ < end_ && next_assign_ < buffer_.next_index() + capacity_) {
        index = next_assign_++;
      } else {
        return;
      }
      const std::string w = credits_.front();
      credits_.pop_front();
      send_work(w, index);
    }
  }

  void check_timeouts() {
    const auto now = clock_type::now();
    std::set<std::string> late;
    for (auto& [index, f] : inflight_)
      if (std::chrono::duration<double>(now - f.since).count() > timeout_) late.insert(f.worker);
    for (auto& w : late) drop_worker(w, "timed out");
    const bool work_left = buffer_.next_index() < end_;
    if (live_.empty() && work_left) {
      const double idle = std::chrono::duration<double>(now - last_worker_time_).count();
      if (idle > timeout_) {
        buffer_.close(fmt::format("no inference worker has been connected for {} s; stopping", timeout_));
        running_ = false;
      }
    } else {
      last_worker_time_ = now;
    }
  }

  void loop() {
    last_worker_time_ = clock_type::now();
    while (running_) {
      zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 1, std::chrono::milliseconds(50));
      if (items[0].revents & ZMQ_POLLIN) {
        std::vector<zmq::message_t> parts;
        while (true) {
          zmq::message_t m;
          if (!socket_.recv(m, zmq::recv_flags::dontwait)) break;
          const bool more = m.more();
          parts.push_back(std::move(m));
          if (!more) {
            on_message(parts);
            parts.clear();
          }
        }
      }
      dispatch();
      check_timeouts();
      if (buffer_.next_index() >= end_ && inflight_.empty()) break;
    }
    for (auto& w : live_) {  // tell every worker we are done
      socket_.send(zmq::buffer(w), zmq::send_flags::sndmore);
      socket_.send(zmq::str_buffer("STOP"), zmq::send_flags::dontwait);
    }
  }

  const std::vector<TrainSample>& samples_;
  std::vector<int> aux_;
  int hidden_;
  SampleBuffer buffer_;
  int64_t next_assign_, end_;
  int capacity_;
  double timeout_;
  zmq::context_t ctx_;
  zmq::socket_t socket_;
  std::thread io_;
  std::atomic<bool> running_{true};
  std::deque<std::string> credits_;
  std::deque<int64_t> reassign_;
  std::atomic<int64_t> reassigned_{0};
  std::map<int64_t, InFlight> inflight_;
  std::set<std::string> live_, dead_;
  std::map<std::string, clock_type::time_point> last_seen_;
  clock_type::time_point last_worker_time_;
};
}  // namespace

std::unique_ptr<HiddenSource> make_zmq_source(const std::string& endpoint, const std::vector<TrainSample>& samples,
                                              const std::vector<int>& aux_layers, int hidden, int64_t first,
                                              int64_t end, int capacity, int worker_timeout_s) {
  return std::make_unique<ZmqSource>(endpoint, samples, aux_layers, hidden, first, end, capacity, worker_timeout_s);
}

int64_t run_inference_worker(ThreadPool& pool, Model& target, const std::string& endpoint, int64_t max_samples) {
  zmq::context_t ctx;
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 1000);
  sock.connect(endpoint);
  // Two credits: one sample computing while the next one's request is already on its way.
  for (int i = 0; i < 2; ++i) sock.send(zmq::str_buffer("READY"), zmq::send_flags::none);
  int64_t done = 0;
  auto idle_since = clock_type::now();
  for (;;) {
    zmq::pollitem_t items[] = {{sock.handle(), 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, 1, std::chrono::milliseconds(200));
    if (!(items[0].revents & ZMQ_POLLIN)) {
      if (std::chrono::duration<double>(clock_type::now() - idle_since).count() > 600) {
        spdlog::warn("no work for 10 minutes; the trainer is gone, exiting");
        break;
      }
      continue;
    }
    std::vector<zmq::message_t> parts;
    zmq::message_t m;
    do {
      (void)sock.recv(m);
      parts.push_back(std::move(m));
    } while (parts.back().more());
    idle_since = clock_type::now();
    const std::string type = text_of(parts[0]);
    if (type == "STOP") break;
    if (type != "WORK" || parts.size() != 4) continue;
    auto h = nlohmann::json::parse(text_of(parts[1]));
    TrainSample s;
    s.index = h.at("index").get<int64_t>();
    s.ids = vector_of<int>(parts[2]);
    s.loss_mask = vector_of<uint8_t>(parts[3]);
    const auto t0 = clock_type::now();
    HiddenSample out = compute_hidden(pool, target, s, h.at("aux_layers").get<std::vector<int>>());
    nlohmann::json rh = {{"index", s.index},
                         {"hidden", out.hidden},
                         {"seconds", std::chrono::duration<double>(clock_type::now() - t0).count()}};
    sock.send(zmq::str_buffer("RESULT"), zmq::send_flags::sndmore);
    sock.send(zmq::buffer(rh.dump()), zmq::send_flags::sndmore);
    sock.send(bytes_of(out.ids), zmq::send_flags::sndmore);
    sock.send(bytes_of(out.loss_mask), zmq::send_flags::sndmore);
    sock.send(bytes_of(out.aux), zmq::send_flags::sndmore);
    sock.send(bytes_of(out.last), zmq::send_flags::none);
    if (max_samples > 0 && ++done >= max_samples) return done;  // exit without BYE, like a crash
    if (max_samples <= 0) ++done;
  }
  sock.send(zmq::str_buffer("BYE"), zmq::send_flags::dontwait);
  return done;
}

}  // namespace eaglet
