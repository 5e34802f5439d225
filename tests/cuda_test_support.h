// What the CUDA test binaries share: guarded device copies of host buffers, the stream
// the calls run on, and a main() that skips without a device and runs the suite twice.
// The including file defines DOCTEST_CONFIG_IMPLEMENT before including doctest.
#pragma once

#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace test {

// The stream every call runs on: the legacy default stream on the first pass of
// cuda_test_main, a non-blocking stream on the second.
inline cudaStream_t test_stream = nullptr;

constexpr uint8_t kDeviceGuard = 0x5A;

// A device copy of a host buffer with kGuard guard bytes on each side inside the same
// allocation: compute-sanitizer only sees writes past the allocation, these show writes
// just past the buffer in a plain run too.
struct DeviceCopy {
    uint8_t *base = nullptr;
    Guarded *host;
    explicit DeviceCopy(Guarded *h) : host(h) {
        REQUIRE(cudaMalloc(reinterpret_cast<void **>(&base), h->size() + 2 * kGuard) == cudaSuccess);
        REQUIRE(cudaMemset(base, kDeviceGuard, h->size() + 2 * kGuard) == cudaSuccess);
        REQUIRE(cudaMemcpy(ptr(), h->data(), h->size(), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    DeviceCopy(const DeviceCopy &) = delete;
    DeviceCopy &operator=(const DeviceCopy &) = delete;
    ~DeviceCopy() { cudaFree(base); }
    uint8_t *ptr() { return base + kGuard; }
    template <typename T> T *as() { return reinterpret_cast<T *>(ptr()); }
    void back() { REQUIRE(cudaMemcpy(host->data(), ptr(), host->size(), cudaMemcpyDeviceToHost) == cudaSuccess); }
    bool guards_intact() {
        std::vector<uint8_t> g(kGuard);
        for (size_t off : {size_t(0), kGuard + host->size()}) {
            REQUIRE(cudaMemcpy(g.data(), base + off, g.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
            if (std::any_of(g.begin(), g.end(), [](uint8_t b) { return b != kDeviceGuard; })) return false;
        }
        return true;
    }
};

// The params of the variant that last ran `op`; empty if none ran.
inline std::map<std::string, std::string> params_of_last(const char *op) {
    const char *last = schedx_last_variant(op);
    for (int i = 0; last && i < schedx_variant_count(); i++) {
        schedx_variant_info info;
        schedx_get_variant(i, &info);
        if (std::string(info.name) == last) return params_of(info);
    }
    return {};
}

// The schedule param of the variant that last ran `op`, or "none".
inline std::string schedule_of_last(const char *op) {
    const auto params = params_of_last(op);
    return params.empty() ? "none" : params.at("schedule");
}

// The current device's compute capability, 10 * major + minor (variants' min_sm).
inline int device_sm() {
    int dev = 0, major = 0, minor = 0;
    REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess);
    return 10 * major + minor;
}

// SCHEDX_TEST_QUICK=1 (set by tools/gpu_check.sh for racecheck, which slows kernels by
// orders of magnitude): one padded shape per variant, plus the ragged ones the general
// variants take, one scale, one stream pass; every kernel still launches.
inline bool quick_run() {
    const char *v = std::getenv("SCHEDX_TEST_QUICK");
    return v && *v && std::string(v) != "0";
}

// Exits 77 (ctest: skipped) without a CUDA device; else runs the suite once on the legacy
// default stream and once on a non-blocking stream (quick runs: the first pass only, the
// kernels are the same).
inline int cuda_test_main(int argc, char **argv) {
    ignore_user_tuning_db();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    doctest::Context ctx(argc, argv);
    int r = ctx.run();
    if (quick_run()) return r;
    cudaStreamCreateWithFlags(&test_stream, cudaStreamNonBlocking);
    r |= ctx.run();
    return r;
}

}  // namespace test
