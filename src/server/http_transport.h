// The HTTP/1.1 connection layer under `eaglet serve`, on Boost.Beast. One I/O thread drives every
// connection asynchronously, so a slow or stalled client holds a socket, never a thread (eight
// clients trickling header bytes used to block cpp-httplib's whole worker pool). Every request
// must arrive whole, headers and body, within a deadline from its first byte; bodies and headers
// have size limits; handlers run on a small pool, and responses (whole or streamed in chunks) are
// written from any thread. A client that goes away is noticed at once, also while its request is
// still being generated, so the work can be cancelled.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace eaglet::http {

struct Limits {
  size_t max_body_bytes = 4 << 20;
  // Body bytes received and not yet handled, over all connections; 503 beyond. Counted as the
  // bytes arrive, never from the Content-Length a client announces.
  size_t max_buffered_body_bytes = 256 << 20;
  size_t max_header_bytes = 16 << 10;
  double request_timeout_s = 30;  // from a request's first byte to its last
  double idle_timeout_s = 60;     // a keep-alive connection waiting for its next request
  double write_timeout_s = 60;    // one write the client does not take (stopped reading)
  // A stream whose client leaves this much unread is closed (and its request cancelled).
  size_t max_unsent_bytes = 8 << 20;
  int max_connections = 1024;     // beyond it new connections get 503 and are closed
  int handler_threads = 4;
};

// Descriptors the process needs besides its connections (model files, logs, the trainer's).
inline constexpr int kReservedDescriptors = 64;
// Makes room for `limits.max_connections` sockets within the descriptor limit (RLIMIT_NOFILE):
// raises the soft limit towards the hard one, or else lowers max_connections, and logs which.
// Without it, sockets past the limit could not even be accepted to be told 503.
void fit_descriptor_limit(Limits& limits);

// Where a route's handler runs: on the handler pool (parsing, tokenizing, templates), or inline
// on the I/O thread for answers that cost nothing (/health must answer while the pool is busy).
enum class Lane { Pool, Inline };

struct Request {
  std::string method, path, body;  // path without the query string
  std::vector<std::pair<std::string, std::string>> headers;
  // The value of a header (case-insensitive name); empty when absent.
  std::string header(const std::string& name) const;
};

class Session;

// The response to one request, shared with whoever produces it; every method may be called from
// any thread. Either send() once, or begin_stream(), write()*, end(). A responder dropped without
// a response answers 500, so a forgotten path cannot leave a client waiting.
class Responder {
 public:
  explicit Responder(std::shared_ptr<Session> session);
  ~Responder();
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  void send(int status, const std::string& content_type, std::string body);
  void begin_stream(const std::string& content_type);  // 200, chunked
  void write(std::string chunk);
  void end();
  // Runs `fn` on the connection's thread, ordered with the writes.
  void post(std::function<void()> fn);
  // `fn` runs once, on the connection's thread, when the client goes away (or the connection is
  // closed by a deadline) before the response has ended; at once if that already happened.
  void on_disconnect(std::function<void()> fn);
  bool disconnected() const;

 private:
  void on_strand(std::function<void(Session&)> fn);
  std::shared_ptr<Session> session_;
  const uint64_t request_;
  std::atomic<bool> responded_{false};
};

using Handler = std::function<void(const Request&, std::shared_ptr<Responder>)>;

class Server {
 public:
  // `error_body(status, message)` is the JSON body of the errors this layer answers itself
  // (413, 431, 404, 405, 503, 500).
  Server(Limits limits, std::function<std::string(int, const std::string&)> error_body);
  ~Server();
  void route(const std::string& method, const std::string& path, Handler handler, Lane lane = Lane::Pool);
  // Binds (port 0: any free port) and returns the port; throws eaglet::Error when it cannot.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns after the I/O and handler threads have finished.
  void run();
  // No new connections; open ones finish what they are doing.
  void stop_accepting();
  // Closes every connection and makes run() return.
  void stop();
  int open_connections() const;
  // Connections whose request has not been answered in full yet (written to the socket).
  int busy_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace eaglet::http
