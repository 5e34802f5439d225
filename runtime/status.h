// Thread-local error state behind schedx_last_error().
#pragma once

#include <string>

#include "schedx/schedx.h"

namespace schedx {

// Records `message` as this thread's last error and returns `status`.
schedx_status fail(schedx_status status, const std::string &message);
void clear_error();

}  // namespace schedx
