// Plain sockets for the server tests that must misbehave as clients do (send half a request, stop
// reading, vanish mid-response), and small readers of what the server reports.
#pragma once
#include <cstdint>
#include <string>

namespace eaglet::test {

class RawConnection {
 public:
  explicit RawConnection(int port);  // connects to 127.0.0.1:port
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool ok() const { return fd_ >= 0; }
  bool send(const std::string& bytes);
  // Reads what arrives within `seconds`; stops early once `until` has been seen or the server closes.
  std::string read(double seconds, const std::string& until = "");
  // Whether the server has closed the connection (a read returns end of file within `seconds`).
  bool closed_by_server(double seconds);
  void close();

 private:
  int fd_ = -1;
};

// An HTTP/1.1 POST with a JSON body, as bytes.
std::string http_post(const std::string& path, const std::string& body, const std::string& extra_headers = "");
// The value of a Prometheus sample whose line starts with `name` (labels included in the match
// when given, e.g. `eaglet:num_requests_running{`); NaN when absent.
double metric(const std::string& metrics_text, const std::string& name);
// Resident memory of a process (VmRSS), in bytes; 0 when unknown.
int64_t process_rss(int pid);

}  // namespace eaglet::test
