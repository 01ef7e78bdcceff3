#include "core/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"

namespace eaglet {

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EAGLET_CHECK(fd >= 0, "cannot create a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // port 0: the kernel picks one that is free
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  EAGLET_CHECK(ok, "cannot find a free port on 127.0.0.1 (set MASTER_PORT)");
  return ntohs(a.sin_port);
}

}  // namespace eaglet
