// Host-side cost of one schedx C ABI call on CUDA (issue 5's target: at most 5 us),
// next to the floors it cannot beat in the same process: a driver launch of an empty
// kernel (bare, with Halide's 24 or so parameters, and inside the context push/pop that
// Halide's runtime makes around each launch), one cudaMemsetAsync and one
// cudaPointerGetAttributes (the device-pointer check schedx makes per pointer).
// Calls go back to back on a tiny shape without synchronizing inside a timed batch.
// With --profile, a SIGPROF sampler (the GPU machine has no perf) prints where the host
// time of the cast_transpose call goes, by function, inclusive of callees.
// Usage: schedx-host-cost [iterations] [--profile]
#include <cuda.h>
#include <cuda_runtime.h>
#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "schedx/schedx.h"

namespace {

// Empty kernels, loaded from PTX like Halide's (the driver JIT-compiles it at load).
constexpr const char *kEmptyPtx = R"(.version 7.0
.target sm_80
.address_size 64
.visible .entry empty1(.param .u64 p0) { ret; }
.visible .entry empty24(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3, .param .u64 p4,
  .param .u64 p5, .param .u64 p6, .param .u64 p7, .param .u64 p8, .param .u64 p9, .param .u64 p10,
  .param .u64 p11, .param .u64 p12, .param .u64 p13, .param .u64 p14, .param .u64 p15, .param .u64 p16,
  .param .u64 p17, .param .u64 p18, .param .u64 p19, .param .u64 p20, .param .u64 p21, .param .u64 p22,
  .param .u64 p23) { ret; }
)";

void check(bool ok, const char *what) {
    if (!ok) {
        std::fprintf(stderr, "host_cost: %s failed: %s\n", what, schedx_last_error());
        std::exit(1);
    }
}

// Median over 7 loops of the host time per call. Only the calls are timed, in batches of
// 64 with a synchronization (untimed) between batches: with the queue drained, a launch
// never waits for the GPU, so a GPU slower than the host cannot pass for host time (the
// first version timed the synchronizations too).
double host_us_per_call(int iterations, const std::function<void()> &call) {
    constexpr int batch = 64;
    std::vector<double> loops;
    for (int rep = 0; rep < 8; rep++) {
        double us = 0;
        int calls = 0;
        for (; calls < iterations; calls += batch) {
            cudaDeviceSynchronize();
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < batch; i++) call();
            us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        }
        if (rep > 0) loops.push_back(us / calls);
    }
    std::sort(loops.begin(), loops.end());
    return loops[loops.size() / 2];
}

// Stacks sampled every 100 us of CPU time into preallocated storage (the handler may
// not allocate); resolved to names after the run.
constexpr int kMaxSamples = 200000, kDepth = 48;
void *samples[kMaxSamples][kDepth];
int sample_depth[kMaxSamples];
volatile sig_atomic_t sample_count = 0;

void on_sigprof(int) {
    const int i = sample_count;
    if (i >= kMaxSamples) return;
    sample_depth[i] = backtrace(samples[i], kDepth);
    sample_count = i + 1;
}

std::string symbol_name(void *pc) {
    Dl_info info{};
    if (!dladdr(pc, &info) || !info.dli_sname) {
        return std::string("?? in ") + (info.dli_fname ? std::strrchr(info.dli_fname, '/') + 1 : "?");
    }
    int status = 0;
    char *demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 ? demangled : info.dli_sname;
    std::free(demangled);
    return name.substr(0, 110);
}

void profile(const char *what, int iterations, const std::function<void()> &call) {
    sample_count = 0;
    void *warm[4];
    backtrace(warm, 4);  // loads the unwinder before the handler needs it
    signal(SIGPROF, on_sigprof);
    itimerval every{{0, 100}, {0, 100}};
    setitimer(ITIMER_PROF, &every, nullptr);
    host_us_per_call(iterations, call);
    itimerval off{};
    setitimer(ITIMER_PROF, &off, nullptr);
    std::map<std::string, int> inclusive;
    for (int i = 0; i < sample_count; i++) {
        std::set<std::string> seen;
        for (int d = 2; d < sample_depth[i]; d++) seen.insert(symbol_name(samples[i][d]));  // 0-1: handler frames
        for (const std::string &s : seen) inclusive[s]++;
    }
    std::vector<std::pair<int, std::string>> ranked;
    for (auto &[name, count] : inclusive) ranked.emplace_back(count, name);
    std::sort(ranked.rbegin(), ranked.rend());
    std::printf("\nProfile of the %s call, %d samples, share of samples inclusive of callees:\n\n", what,
                int(sample_count));
    for (size_t i = 0; i < ranked.size() && i < 40; i++) {
        std::printf("%5.1f%%  %s\n", 100.0 * ranked[i].first / sample_count, ranked[i].second.c_str());
    }
}

}  // namespace

int main(int argc, char **argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 4000;
    const bool with_profile = argc > 2 && std::strcmp(argv[2], "--profile") == 0;
    const int64_t m = 256, k = 256, n = 256;
    void *x = nullptr, *rows = nullptr, *cols = nullptr, *scale = nullptr, *w = nullptr, *scales = nullptr,
         *y = nullptr, *stats = nullptr;
    check(cudaMalloc(&x, m * k * 2) == cudaSuccess && cudaMalloc(&rows, m * k) == cudaSuccess &&
              cudaMalloc(&cols, m * k) == cudaSuccess && cudaMalloc(&scale, 4) == cudaSuccess &&
              cudaMalloc(&w, n * k) == cudaSuccess && cudaMalloc(&scales, n * 2) == cudaSuccess &&
              cudaMalloc(&y, n * 2) == cudaSuccess && cudaMalloc(&stats, 8) == cudaSuccess,
          "cudaMalloc");
    cudaMemset(x, 0x3c, m * k * 2);  // bf16 1.1: not zeros
    cudaMemset(w, 3, n * k);
    cudaMemset(scales, 0x3c, n * 2);
    const float one = 1.0f;
    cudaMemcpy(scale, &one, 4, cudaMemcpyHostToDevice);
    cudaStream_t stream = nullptr;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    float *amax = static_cast<float *>(stats), *scale_inv = amax + 1;

    auto cast = [&](float *a, float *si) {
        check(schedx_cast_transpose_fp8(x, m, k, k, SCHEDX_BF16, static_cast<float *>(scale), SCHEDX_E4M3FN,
                                        static_cast<uint8_t *>(rows), k, static_cast<uint8_t *>(cols), m, a, si,
                                        SCHEDX_DEVICE_CUDA, stream) == SCHEDX_OK,
              "schedx_cast_transpose_fp8");
    };
    auto gemv = [&] {
        check(schedx_w8_linear(x, 1, k, k, SCHEDX_BF16, static_cast<int8_t *>(w), n, k, scales, SCHEDX_BF16, nullptr,
                               y, n, SCHEDX_DEVICE_CUDA, stream) == SCHEDX_OK,
              "schedx_w8_linear");
    };
    cast(nullptr, nullptr);
    gemv();
    cudaPointerAttributes attrs{};
    CUmodule module = nullptr;
    CUfunction empty1 = nullptr, empty24 = nullptr;
    CUcontext primary = nullptr;
    check(cuModuleLoadData(&module, kEmptyPtx) == CUDA_SUCCESS &&
              cuModuleGetFunction(&empty1, module, "empty1") == CUDA_SUCCESS &&
              cuModuleGetFunction(&empty24, module, "empty24") == CUDA_SUCCESS && cuCtxGetCurrent(&primary) == CUDA_SUCCESS,
          "loading the empty kernels");
    uint64_t params[24] = {};
    void *param_ptrs[24];
    for (int i = 0; i < 24; i++) param_ptrs[i] = &params[i];
    auto launch = [&](CUfunction f) {
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, reinterpret_cast<CUstream>(stream), param_ptrs, nullptr);
    };
    std::printf("| call | host us per call |\n|---|---|\n");
    std::printf("| cuLaunchKernel, empty kernel, 1 parameter | %.2f |\n",
                host_us_per_call(iterations, [&] { launch(empty1); }));
    std::printf("| cuLaunchKernel, empty kernel, 24 parameters | %.2f |\n",
                host_us_per_call(iterations, [&] { launch(empty24); }));
    std::printf("| same inside cuCtxPushCurrent / cuCtxPopCurrent (as Halide's runtime) | %.2f |\n",
                host_us_per_call(iterations, [&] {
                    CUcontext popped;
                    cuCtxPushCurrent(primary);
                    launch(empty24);
                    cuCtxPopCurrent(&popped);
                }));
    std::printf("| cudaMemsetAsync 4 bytes (one launch) | %.2f |\n",
                host_us_per_call(iterations, [&] { cudaMemsetAsync(scale_inv, 0, 4, stream); }));
    std::printf("| cudaPointerGetAttributes | %.2f |\n",
                host_us_per_call(iterations, [&] { cudaPointerGetAttributes(&attrs, x); }));
    std::printf("| schedx_cast_transpose_fp8 %ldx%ld bf16 -> e4m3 rows+cols (%s) | %.2f |\n", long(m), long(k),
                schedx_last_variant("cast_transpose"), host_us_per_call(iterations, [&] { cast(nullptr, nullptr); }));
    std::printf("| schedx_cast_transpose_fp8 %ldx%ld with amax | %.2f |\n", long(m), long(k),
                host_us_per_call(iterations, [&] { cast(amax, scale_inv); }));
    std::printf("| schedx_w8_linear M=1 N=K=%ld (%s) | %.2f |\n", long(n), schedx_last_variant("w8_linear"),
                host_us_per_call(iterations, gemv));
    if (with_profile) {
        profile("cast_transpose", iterations, [&] { cast(nullptr, nullptr); });
        profile("cast_transpose with amax", iterations, [&] { cast(amax, scale_inv); });
    }
    cudaStreamSynchronize(stream);
    return 0;
}
