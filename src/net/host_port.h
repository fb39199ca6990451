// host:port strings as the servers (net/http_server.h) and the commands take
// them (`--listen 127.0.0.1:9464`).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace ek::net {

// "127.0.0.1:9464" -> host and port; a bare port means 127.0.0.1.
Status SplitHostPort(const std::string& s, std::string* host, int* port);

// Whether a listen host stays on this machine: localhost, 127.0.0.0/8, ::1.
bool IsLoopbackHost(std::string_view host);

}  // namespace ek::net
