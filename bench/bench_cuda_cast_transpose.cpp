// Times every runnable CUDA cast_transpose variant (bf16 -> e4m3fn, both outputs, with and
// without amax) against a device-to-device copy of the same bytes, in one run.
// Method (../shared/GPU.md): warm-up, CUDA events around 20 back-to-back launches, input
// and output sets rotated so the working set exceeds 4x the 60 MB L2, median of 7.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "schedx/schedx.h"

namespace {

#define CHECK_CUDA(x)                                                                  \
    do {                                                                               \
        cudaError_t e = (x);                                                           \
        if (e != cudaSuccess) {                                                        \
            std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
            std::exit(1);                                                              \
        }                                                                              \
    } while (0)

struct Set {
    void *x;
    uint8_t *rows, *cols;
    float *amax, *scale_inv;
};

struct Timing {
    double median_us, min_us, max_us;
};

template <typename F>
Timing time_us(F launch, int sets) {
    constexpr int kInner = 20, kReps = 7;
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 3; i++) launch(i % sets);
    std::vector<double> t;
    for (int r = 0; r < kReps; r++) {
        cudaEventRecord(a);
        for (int i = 0; i < kInner; i++) launch((r * kInner + i) % sets);
        cudaEventRecord(b);
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms * 1000.0 / kInner);
    }
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return {t[kReps / 2], t.front(), t.back()};
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::pair<int64_t, int64_t>> shapes{{4096, 4096}, {8192, 8192}, {4096, 14336}, {16384, 4096}};
    if (argc > 1 && std::string(argv[1]) == "--quick") shapes.resize(2);
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    cudaDriverGetVersion(&driver);
    std::printf("GPU: %s, driver API %d\n", prop.name, driver);
    float *scale;
    CHECK_CUDA(cudaMalloc(&scale, 4));
    const float scale_h = 448.0f / 3.7f;
    CHECK_CUDA(cudaMemcpy(scale, &scale_h, 4, cudaMemcpyHostToDevice));

    for (auto [m, k] : shapes) {
        const size_t n = size_t(m) * k, bytes_moved = 4 * n;
        const int sets = int(std::max<size_t>(2, (256u << 20) / bytes_moved + 1));
        std::vector<uint16_t> host(n);
        std::mt19937 rng(1);
        for (auto &v : host) v = uint16_t(0x3000 + rng() % 0x1800) | uint16_t((rng() & 1) << 15);
        std::vector<Set> s(sets);
        for (auto &st : s) {
            CHECK_CUDA(cudaMalloc(&st.x, 2 * n));
            CHECK_CUDA(cudaMalloc(&st.rows, n));
            CHECK_CUDA(cudaMalloc(&st.cols, n));
            CHECK_CUDA(cudaMalloc(&st.amax, 4));
            CHECK_CUDA(cudaMalloc(&st.scale_inv, 4));
            CHECK_CUDA(cudaMemcpy(st.x, host.data(), 2 * n, cudaMemcpyHostToDevice));
        }
        // Anchor: a copy moving the same bytes (2 read + 2 written per element).
        Timing copy = time_us([&](int i) { cudaMemcpyAsync(s[(i + 1) % sets].x, s[i].x, 2 * n, cudaMemcpyDeviceToDevice); },
                              sets);
        const double copy_gbs = bytes_moved / copy.median_us / 1e3;
        std::printf("\n## %lld x %lld (bf16 -> e4m3fn), %d buffer sets\n", (long long)m, (long long)k, sets);
        std::printf("| variant | amax | median us | min-max us | GB/s | %% of copy |\n|---|---|---|---|---|---|\n");
        std::printf("| device-to-device copy (anchor) | - | %.1f | %.1f-%.1f | %.0f | 100%% |\n", copy.median_us,
                    copy.min_us, copy.max_us, copy_gbs);
        auto run = [&](bool amax) {
            return [&, amax](int i) {
                schedx_status r = schedx_cast_transpose_fp8(s[i].x, m, k, k, SCHEDX_BF16, scale, SCHEDX_E4M3FN, s[i].rows, k,
                                                            s[i].cols, m, amax ? s[i].amax : nullptr,
                                                            amax ? s[i].scale_inv : nullptr, SCHEDX_DEVICE_CUDA, nullptr);
                if (r != SCHEDX_OK) {
                    std::fprintf(stderr, "schedx error %d: %s\n", r, schedx_last_error());
                    std::exit(1);
                }
            };
        };
        for (int vi = -1; vi < schedx_variant_count(); vi++) {
            std::string name = "(dispatch)";
            if (vi >= 0) {
                schedx_variant_info info;
                schedx_get_variant(vi, &info);
                if (std::string(info.op) != "cast_transpose" || std::string(info.device) != "cuda" ||
                    std::strstr(info.params, "in_type=bf16") == nullptr || std::strstr(info.params, "outputs=") != nullptr ||
                    std::strstr(info.params, "fp8=e5m2") != nullptr) {
                    continue;
                }
                name = info.name;
            }
            schedx_force_variant("cast_transpose", vi >= 0 ? name.c_str() : nullptr);
            const bool fused_amax = name.find("amax") != std::string::npos;
            for (bool amax : {false, true}) {
                if (fused_amax && !amax) continue;
                Timing t = time_us(run(amax), sets);
                std::printf("| %s | %s | %.1f | %.1f-%.1f | %.0f | %.1f%% |\n", name.c_str(), amax ? "on" : "off",
                            t.median_us, t.min_us, t.max_us, bytes_moved / t.median_us / 1e3,
                            100.0 * copy.median_us / t.median_us);
            }
        }
        schedx_force_variant("cast_transpose", nullptr);
        for (auto &st : s) {
            cudaFree(st.x);
            cudaFree(st.rows);
            cudaFree(st.cols);
            cudaFree(st.amax);
            cudaFree(st.scale_inv);
        }
    }
    return 0;
}
