#include "status.h"

namespace schedx {
namespace {
thread_local std::string last_error;
}

schedx_status fail(schedx_status status, const std::string &message) {
    last_error = message;
    return status;
}

void clear_error() { last_error.clear(); }

}  // namespace schedx

extern "C" const char *schedx_last_error(void) { return schedx::last_error.c_str(); }
