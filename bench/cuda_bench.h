// What the CUDA benchmarks share: a checked CUDA runtime call, and schedx-explore's CUDA
// backend (buffers, timing) with the device's SM count, or a one-line reason to stop.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "backend.h"

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(1);                                                                            \
        }                                                                                            \
    } while (0)

struct CudaBench {
    std::unique_ptr<explore::Backend> backend;
    int device = 0, sms = 0;
};

// The backend on the current device; exits with `tool`'s name and the reason without one.
inline CudaBench cuda_bench_or_exit(const char *tool) {
    CudaBench c;
    std::string why;
    c.backend = explore::make_cuda_backend(&why);
    if (!c.backend) {
        std::fprintf(stderr, "%s: %s\n", tool, why.c_str());
        std::exit(1);
    }
    CHECK(cudaGetDevice(&c.device));
    CHECK(cudaDeviceGetAttribute(&c.sms, cudaDevAttrMultiProcessorCount, c.device));
    return c;
}
