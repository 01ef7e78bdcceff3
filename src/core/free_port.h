// A TCP port on 127.0.0.1 that nothing listens on now. Rendezvous (c10d's TCPStore, ZeroMQ) binds
// it moments later; asking the kernel beats deriving a number (a process id, a fixed base), which
// can land on a port another process or an outgoing connection holds (32768+ is the ephemeral range).
#pragma once

namespace eaglet {

// Throws eaglet::Error when no socket can be bound.
int free_local_port();

}  // namespace eaglet
