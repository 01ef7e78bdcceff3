#include "server/http_transport.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <dirent.h>
#include <malloc.h>
#include <sys/resource.h>

#include <deque>
#include <map>
#include <optional>
#include <strings.h>

#include "core/error.h"

namespace eaglet::http {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

std::string Request::header(const std::string& name) const {
  for (auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return "";
}

namespace {
int open_descriptors() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
    n -= 3;  // ".", "..", and the directory's own descriptor
  }
  return std::max(n, 3);
}
}  // namespace

void fit_descriptor_limit(Limits& limits) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  const rlim_t need = rlim_t(limits.max_connections) + rlim_t(open_descriptors() + kReservedDescriptors);
  if (rl.rlim_cur >= need) return;
  const rlim_t soft = rl.rlim_cur;
  rlimit raised = rl;
  raised.rlim_cur = rl.rlim_max == RLIM_INFINITY ? need : std::min(need, rl.rlim_max);
  if (raised.rlim_cur > soft && setrlimit(RLIMIT_NOFILE, &raised) == 0) {
    spdlog::info("raised the open-file limit from {} to {} for --max-connections {}", soft, raised.rlim_cur,
                 limits.max_connections);
    rl = raised;
  }
  if (rl.rlim_cur >= need) return;
  const int fit = std::max(1, int(rl.rlim_cur) - open_descriptors() - kReservedDescriptors);
  spdlog::warn("--max-connections {} does not fit the open-file limit ({} soft, {} hard): lowered to {} (raise the limit "
               "with `ulimit -n` for more)", limits.max_connections, rl.rlim_cur,
               rl.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(rl.rlim_max), fit);
  limits.max_connections = fit;
}

struct Route {
  Handler handler;
  Lane lane = Lane::Pool;
};

// What every connection shares with the server.
struct Shared {
  Limits limits;
  std::function<std::string(int, const std::string&)> error_body;
  std::map<std::string, std::map<std::string, Route>> routes;  // path -> method -> route
  net::thread_pool handlers;
  std::atomic<int> connections{0};
  std::atomic<int> busy{0};  // connections with a request whose response is not written yet
  std::atomic<bool> closing{false};  // answer with "Connection: close" from now on
  Shared(Limits l, std::function<std::string(int, const std::string&)> eb)
      : limits(l), error_body(std::move(eb)), handlers(size_t(std::max(1, l.handler_threads))) {}

  // Bytes of request bodies received and not yet handled, within limits.max_buffered_body_bytes.
  bool reserve_body(size_t n) {
    size_t cur = body_bytes.load();
    do {
      if (cur + n > limits.max_buffered_body_bytes && cur > 0) return false;  // one body always fits
    } while (!body_bytes.compare_exchange_weak(cur, cur + n));
    return true;
  }
  void release_body(size_t n) {
    if (n == 0) return;
    body_bytes -= n;
    // glibc keeps freed memory in per-thread arenas; after a large body, give it back.
    if (n >= (1 << 20)) malloc_trim(0);
  }
  std::atomic<size_t> body_bytes{0};
};

namespace {
std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// A request body as a string whose bytes are charged to the shared budget as they arrive. (Beast's
// string_body reserves the announced Content-Length up front, and charging that let ~85
// connections that announced 4 MB and sent nothing take the whole budget.)
struct BudgetedBody {
  struct value_type {
    std::string data;
    Shared* shared = nullptr;
    size_t* charged = nullptr;  // the connection's count for the request being read
  };
  static std::uint64_t size(const value_type& v) { return v.data.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(bhttp::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>&, error_code& ec) { ec = {}; }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, error_code& ec) {
      const size_t n = net::buffer_size(buffers);
      if (!body_.shared->reserve_body(n)) {
        ec = bhttp::error::buffer_overflow;
        return 0;
      }
      *body_.charged += n;
      const size_t at = body_.data.size();
      body_.data.resize(at + n);
      net::buffer_copy(net::buffer(body_.data.data() + at, n), buffers);
      ec = {};
      return n;
    }
    void finish(error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};
}  // namespace

// One client connection. Everything below runs on the connection's strand (the I/O thread);
// Responder methods from other threads post onto it.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), shared_(std::move(shared)) {
    ++shared_->connections;
    error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);  // token chunks go out as they are written
  }
  ~Session() {
    shared_->release_body(body_reserved_);
    --shared_->connections;
  }

  void start() { read_request(); }
  // Over the connection limit: one 503 and close.
  void reject() {
    keep_alive_ = false;
    phase_ = Phase::Handling;
    queue(full_response(503, "application/json", shared_->error_body(503, "the server has too many open connections")), true);
  }

  void post(std::function<void()> fn) { net::post(socket_.get_executor(), std::move(fn)); }
  std::atomic<bool> disconnected{false};
  // Which request of the connection is being answered: a responder's late call about an earlier
  // request (keep-alive reuses the connection) must not leak into the next response.
  uint64_t request_number() const { return requests_; }

  // --- the response, on the strand ---
  void send(int status, const std::string& type, std::string body) { queue(full_response(status, type, body), true); }
  void begin_stream(const std::string& type) {
    chunked_ = http11_;
    if (!http11_) keep_alive_ = false;  // an HTTP/1.0 stream ends when the connection does
    queue(head(200, type, "") + (chunked_ ? "Transfer-Encoding: chunked\r\n" : "") + "Cache-Control: no-cache\r\n\r\n", false);
  }
  void write(std::string chunk) {
    if (chunk.empty()) return;  // an empty chunk would end a chunked body
    queue(chunked_ ? fmt::format("{:x}\r\n", chunk.size()) + chunk + "\r\n" : std::move(chunk), false);
    if (unsent_ > shared_->limits.max_unsent_bytes && phase_ != Phase::Closed) {
      spdlog::warn("closing a stream whose client left {} bytes unread (the limit is {})", unsent_,
                   shared_->limits.max_unsent_bytes);
      close();
    }
  }
  void end() { queue(chunked_ ? "0\r\n\r\n" : "", true); }
  void on_disconnect(std::function<void()> fn) {
    if (phase_ == Phase::Closed || disconnected) fn();
    else if (!response_ended_) on_disconnect_.push_back(std::move(fn));
  }

 private:
  enum class Phase { Reading, Handling, Closed };

  // --- reading a request: the idle deadline until its first byte, then the request deadline ---
  void read_request() {
    ++requests_;  // responders of the previous request are stale from here on
    phase_ = Phase::Reading;
    response_ended_ = false;
    chunked_ = false;
    parser_.emplace();
    parser_->header_limit(uint32_t(shared_->limits.max_header_bytes));
    parser_->body_limit(shared_->limits.max_body_bytes);
    parser_->get().body().shared = shared_.get();
    parser_->get().body().charged = &body_reserved_;
    if (buffer_.size() > 0) return read_header();
    arm_timer(shared_->limits.idle_timeout_s);
    socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    arm_timer(shared_->limits.request_timeout_s);
    bhttp::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->read_failed(ec);
      auto& req = self->parser_->get();
      if (auto len = self->parser_->content_length(); len && *len > self->shared_->limits.max_body_bytes)
        return self->read_failed(bhttp::error::body_limit);
      // Bodies are held whole until handled: the sum over all connections has a budget, charged
      // by BudgetedBody as bytes arrive, so a thousand clients sending 4 MB at once get 503
      // instead of taking 4 GB, and clients that only announce a body take nothing.
      if (strcasecmp(std::string(req[bhttp::field::expect]).c_str(), "100-continue") == 0) {
        static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        return net::async_write(self->socket_, net::buffer(kContinue), [self](error_code ec, size_t) {
          if (ec) return self->close();
          self->read_body();
        });
      }
      self->read_body();
    });
  }

  void read_body() {
    bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->read_failed(ec);
      self->dispatch();
    });
  }

  void read_failed(error_code ec) {
    shared_->release_body(std::exchange(body_reserved_, 0));
    if (phase_ == Phase::Closed) return;
    keep_alive_ = false;
    phase_ = Phase::Handling;
    const size_t body = shared_->limits.max_body_bytes, header = shared_->limits.max_header_bytes;
    if (ec == bhttp::error::body_limit)
      queue(error_response(413, fmt::format("request body too large (the limit is {} bytes)", body)), true);
    else if (ec == bhttp::error::header_limit)
      queue(error_response(431, fmt::format("request headers too large (the limit is {} bytes)", header)), true);
    else if (ec == bhttp::error::buffer_overflow)
      queue(error_response(503, "too many large request bodies in flight; retry later"), true);
    else if (ec == bhttp::error::end_of_stream || ec == net::error::eof || ec == net::error::operation_aborted ||
             ec == net::error::connection_reset || ec == net::error::bad_descriptor)
      close();  // the client left, or the request deadline closed the socket
    else
      queue(error_response(400, "malformed HTTP request: " + ec.message()), true);
  }

  void dispatch() {
    cancel_timer();
    phase_ = Phase::Handling;
    busy_ = true;
    ++shared_->busy;
    bhttp::request<BudgetedBody> msg = parser_->release();
    keep_alive_ = msg.keep_alive() && !shared_->closing;
    http11_ = msg.version() >= 11;
    Request req;
    req.method = std::string(msg.method_string());
    const std::string target(msg.target());
    req.path = target.substr(0, target.find('?'));
    for (auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    req.body = std::move(msg.body().data);
    auto route = shared_->routes.find(req.path);
    if (route == shared_->routes.end()) return queue(error_response(404, "route not found: " + req.path), true);
    auto handler = route->second.find(req.method);
    if (handler == route->second.end())
      return queue(error_response(405, fmt::format("method {} is not allowed on {}", req.method, req.path)), true);
    watch_for_disconnect();
    auto responder = std::make_shared<Responder>(shared_from_this());
    if (buffer_.capacity() > (64 << 10)) buffer_.shrink_to_fit();  // a big body passed through it
    auto run = [h = handler->second.handler, req = std::move(req), responder, shared = shared_,
                reserved = std::exchange(body_reserved_, 0)]() mutable {
      try {
        h(req, std::move(responder));
      } catch (const std::exception& e) {
        spdlog::error("{} {}: {}", req.method, req.path, e.what());
      }  // a responder that never answered sends 500 when it is released
      req = {};
      shared->release_body(reserved);
    };
    if (handler->second.lane == Lane::Inline) run();
    else net::post(shared_->handlers, std::move(run));
  }

  // While a request is handled, one read stays posted: it fails the moment the client closes the
  // connection (so generation can be cancelled). Bytes it gets (a pipelined next request) are kept.
  void watch_for_disconnect() {
    if (watching_ || buffer_.size() >= shared_->limits.max_header_bytes) return;
    watching_ = true;
    socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->watching_ = false;
      if (self->phase_ == Phase::Closed) return;
      if (!ec) {
        self->buffer_.commit(n);
        if (self->response_written()) return self->next_request();
        if (!self->response_ended_) self->watch_for_disconnect();
        return;
      }
      if (ec == net::error::operation_aborted && self->response_written()) return self->next_request();
      self->close();  // the client went away
    });
  }

  // --- writing: responses are queued as bytes and written in order, one write at a time ---
  void queue(std::string bytes, bool last) {
    if (phase_ == Phase::Closed || response_ended_) return;
    unsent_ += bytes.size();
    if (!bytes.empty()) out_.push_back(std::move(bytes));
    if (last) {
      response_ended_ = true;
      on_disconnect_.clear();
    }
    if (!writing_) write_pending();
  }

  void write_pending() {
    if (out_.empty()) {
      writing_ = false;
      if (response_ended_) response_done();
      return;
    }
    writing_ = true;
    in_flight_.swap(out_);  // everything queued goes out in one write
    std::vector<net::const_buffer> buffers;
    for (auto& s : in_flight_) buffers.push_back(net::buffer(s));
    arm_timer(shared_->limits.write_timeout_s);
    net::async_write(socket_, buffers, [self = shared_from_this()](error_code ec, size_t) {
      self->cancel_timer();
      for (auto& b : self->in_flight_) self->unsent_ -= b.size();
      self->in_flight_.clear();
      if (ec) return self->close();
      self->write_pending();
    });
  }

  bool response_written() const { return response_ended_ && !writing_ && out_.empty(); }

  void response_done() {
    if (phase_ == Phase::Closed) return;
    if (busy_) {
      busy_ = false;
      --shared_->busy;
    }
    if (watching_) {
      error_code ec;
      socket_.cancel(ec);  // the watching read ends and calls next_request()
      return;
    }
    next_request();
  }

  void next_request() {
    if (!keep_alive_ || shared_->closing) return linger_close();
    read_request();
  }

  // Closing right after an error answer would reset the connection while the client is still
  // sending, and it might never read the answer: stop sending, then drain for a moment.
  void linger_close() {
    phase_ = Phase::Closed;
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    arm_timer(2.0);
    drain();
  }
  void drain() {
    socket_.async_read_some(net::buffer(scratch_), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    if (busy_) {
      busy_ = false;
      --shared_->busy;
    }
    const bool gone_early = phase_ == Phase::Handling && !response_ended_;
    phase_ = Phase::Closed;
    cancel_timer();
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    if (gone_early) {
      disconnected = true;
      auto callbacks = std::move(on_disconnect_);
      on_disconnect_.clear();
      for (auto& fn : callbacks) fn();
    }
  }

  void arm_timer(double s) {
    timer_.expires_after(seconds(s));  // cancels the previous wait
    timer_.async_wait([self = shared_from_this(), gen = ++timer_gen_](error_code ec) {
      if (!ec && gen == self->timer_gen_) self->close();
    });
  }
  void cancel_timer() {
    ++timer_gen_;
    timer_.cancel();
  }

  std::string head(int status, const std::string& type, const std::string& length) const {
    std::string h = fmt::format("HTTP/1.1 {} {}\r\nServer: eaglet\r\nContent-Type: {}\r\nConnection: {}\r\n", status,
                                std::string(bhttp::obsolete_reason(bhttp::status(status))), type,
                                keep_alive_ ? "keep-alive" : "close");
    if (!length.empty()) h += "Content-Length: " + length + "\r\n";
    return h;
  }
  std::string full_response(int status, const std::string& type, const std::string& body) const {
    return head(status, type, std::to_string(body.size())) + "\r\n" + body;
  }
  std::string error_response(int status, const std::string& message) const {
    return full_response(status, "application/json", shared_->error_body(status, message));
  }

  tcp::socket socket_;
  net::steady_timer timer_;
  std::shared_ptr<Shared> shared_;
  boost::beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<BudgetedBody>> parser_;
  Phase phase_ = Phase::Reading;
  bool keep_alive_ = true, http11_ = true, chunked_ = false;
  bool response_ended_ = false, writing_ = false, watching_ = false, busy_ = false;
  std::deque<std::string> out_, in_flight_;
  std::vector<std::function<void()>> on_disconnect_;
  uint64_t timer_gen_ = 0, requests_ = 0;
  size_t body_reserved_ = 0;  // of the body budget, for the request being read
  size_t unsent_ = 0;         // bytes queued or being written
  char scratch_[4096];
};

// --- Responder: posts each call onto the connection's strand, for its own request only ---

Responder::Responder(std::shared_ptr<Session> session)
    : session_(std::move(session)), request_(session_->request_number()) {}

Responder::~Responder() {
  if (!responded_)
    on_strand([](Session& s) {
      s.send(500, "application/json",
             R"({"error": {"message": "the request was not answered", "type": "server_error", "param": null, "code": 500}})");
    });
}

void Responder::on_strand(std::function<void(Session&)> fn) {
  session_->post([s = session_, request = request_, fn = std::move(fn)] {
    if (s->request_number() == request) fn(*s);
  });
}

void Responder::send(int status, const std::string& content_type, std::string body) {
  responded_ = true;
  on_strand([status, content_type, body = std::move(body)](Session& s) mutable { s.send(status, content_type, std::move(body)); });
}

void Responder::begin_stream(const std::string& content_type) {
  responded_ = true;
  on_strand([content_type](Session& s) { s.begin_stream(content_type); });
}

void Responder::write(std::string chunk) {
  on_strand([chunk = std::move(chunk)](Session& s) mutable { s.write(std::move(chunk)); });
}

void Responder::end() {
  on_strand([](Session& s) { s.end(); });
}

void Responder::post(std::function<void()> fn) { session_->post(std::move(fn)); }

void Responder::on_disconnect(std::function<void()> fn) {
  on_strand([fn = std::move(fn)](Session& s) mutable { s.on_disconnect(std::move(fn)); });
}

bool Responder::disconnected() const { return session_->disconnected; }

// --- Server ---

struct Server::Impl {
  std::shared_ptr<Shared> shared;
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer retry{ioc};
  std::chrono::steady_clock::time_point last_accept_warning{};
  int accept_failures = 0;  // since the last warning

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
        ++accept_failures;
        const auto now = std::chrono::steady_clock::now();
        if (now - last_accept_warning > std::chrono::seconds(10)) {  // not ten lines a second
          spdlog::warn("accept failed {} time(s) in the last 10 s: {} ({} connections open)", accept_failures,
                       ec.message(), shared->connections.load());
          last_accept_warning = now;
          accept_failures = 0;
        }
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](error_code) { accept(); });
        return;
      }
      auto session = std::make_shared<Session>(std::move(socket), shared);
      if (shared->connections > shared->limits.max_connections) session->post([session] { session->reject(); });
      else session->post([session] { session->start(); });
      accept();
    });
  }
};

Server::Server(Limits limits, std::function<std::string(int, const std::string&)> error_body)
    : impl_(std::make_unique<Impl>()) {
  fit_descriptor_limit(limits);
  impl_->shared = std::make_shared<Shared>(limits, std::move(error_body));
}

Server::~Server() {
  stop();
  impl_->shared->handlers.join();
}

void Server::route(const std::string& method, const std::string& path, Handler handler, Lane lane) {
  impl_->shared->routes[path][method] = Route{std::move(handler), lane};
}

int Server::bind(const std::string& host, int port) {
  error_code ec;
  tcp::resolver resolver(impl_->ioc);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) fail("cannot resolve host '{}': {}", host, ec.message());
  const tcp::endpoint ep = *results.begin();
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on {}:{}: {}", host, port, ec.message());
  return a.local_endpoint().port();
}

void Server::run() {
  impl_->accept();
  impl_->ioc.run();
}

void Server::stop_accepting() {
  impl_->shared->closing = true;
  net::post(impl_->ioc, [this] {
    error_code ec;
    impl_->acceptor.close(ec);
    impl_->retry.cancel();
  });
}

void Server::stop() { impl_->ioc.stop(); }

int Server::open_connections() const { return impl_->shared->connections; }

int Server::busy_connections() const { return impl_->shared->busy; }

}  // namespace eaglet::http
