// CUDA interop without a link-time dependency on the driver: libcuda is dlopened on
// first use, so libschedx loads and its CPU path works on machines without a GPU.
// Halide's CUDA runtime is pointed at the context that owns the caller's memory (the
// device's primary context, as the CUDA runtime API and PyTorch use) and at the
// caller's stream, both carried per call in the pipeline's user_context.
#pragma once

#include <cstdint>
#include <string>

#include "HalideRuntime.h"
#include "schedx/schedx.h"

namespace schedx {

// What Halide's acquire-context and get-stream hooks read; passed as user_context.
struct CudaCallContext {
    void *context = nullptr;  // CUcontext
    void *stream = nullptr;   // CUstream
};

// Loads the driver and installs the Halide hooks; SCHEDX_ERR_NO_CUDA if unavailable.
schedx_status cuda_init();

// Finds the primary context of the device that owns `ptr` (SCHEDX_ERR_POINTER_DEVICE if
// `ptr` is not device memory).
schedx_status cuda_context_for(const void *ptr, const char *arg_name, void **context);

// True only when the driver is already loaded in this process and says `ptr` is device
// memory: lets the CPU path reject device pointers without ever starting CUDA itself.
bool is_known_device_pointer(const void *ptr);

schedx_status cuda_wrap(CudaCallContext *ctx, halide_buffer_t *buf, const void *ptr);
void cuda_detach(CudaCallContext *ctx, halide_buffer_t *buf);

// The device's name and the driver version, for the tuning database; "" without CUDA.
std::string cuda_device_name(int ordinal = 0);
int cuda_driver_version();

}  // namespace schedx
