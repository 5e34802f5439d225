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

extern "C" const char *schedx_status_name(schedx_status status) {
    switch (status) {
    case SCHEDX_OK: return "SCHEDX_OK";
    case SCHEDX_ERR_NULL_POINTER: return "SCHEDX_ERR_NULL_POINTER";
    case SCHEDX_ERR_BAD_SIZE: return "SCHEDX_ERR_BAD_SIZE";
    case SCHEDX_ERR_BAD_LEADING_DIM: return "SCHEDX_ERR_BAD_LEADING_DIM";
    case SCHEDX_ERR_OVERLAP: return "SCHEDX_ERR_OVERLAP";
    case SCHEDX_ERR_UNSUPPORTED_DTYPE: return "SCHEDX_ERR_UNSUPPORTED_DTYPE";
    case SCHEDX_ERR_UNSUPPORTED_FORMAT: return "SCHEDX_ERR_UNSUPPORTED_FORMAT";
    case SCHEDX_ERR_BAD_DEVICE: return "SCHEDX_ERR_BAD_DEVICE";
    case SCHEDX_ERR_POINTER_DEVICE: return "SCHEDX_ERR_POINTER_DEVICE";
    case SCHEDX_ERR_SIZE_OVERFLOW: return "SCHEDX_ERR_SIZE_OVERFLOW";
    case SCHEDX_ERR_UNKNOWN_VARIANT: return "SCHEDX_ERR_UNKNOWN_VARIANT";
    case SCHEDX_ERR_VARIANT_CANNOT_RUN: return "SCHEDX_ERR_VARIANT_CANNOT_RUN";
    case SCHEDX_ERR_NO_CUDA: return "SCHEDX_ERR_NO_CUDA";
    case SCHEDX_ERR_KERNEL: return "SCHEDX_ERR_KERNEL";
    case SCHEDX_ERR_DATABASE: return "SCHEDX_ERR_DATABASE";
    case SCHEDX_ERR_NO_VARIANT: return "SCHEDX_ERR_NO_VARIANT";
    case SCHEDX_ERR_MISALIGNED: return "SCHEDX_ERR_MISALIGNED";
    }
    return "SCHEDX_UNKNOWN_STATUS";
}
