// Both operators from 8 threads at once on the GPU, each thread on its own non-blocking
// CUDA stream and on a different case at any moment (ragged shapes on the general, the
// shifted tiled and the element-I/O variants, aligned ones on the tiled, GEMV and small-batch ones): every result must equal
// the serial run's byte for byte, outputs poisoned before each call. Then a first call on
// a stream that is being captured into a CUDA graph, and a GEMV captured. Exits 77 (ctest: skipped) without a
// CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "concurrency_cases.h"

using namespace concurrency;

namespace {

constexpr int kIterations = 150;  // per thread: every thread meets every case many times

// A device allocation, optionally initialised from the host.
struct DeviceBuffer {
    void *ptr = nullptr;
    DeviceBuffer(size_t bytes, const void *host = nullptr) {
        REQUIRE(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)) == cudaSuccess);
        if (host) REQUIRE(cudaMemcpy(ptr, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    }
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    ~DeviceBuffer() { cudaFree(ptr); }
    template <typename T> T *as() const { return static_cast<T *>(ptr); }
};

// Inputs on the device, uploaded once and read by every thread.
struct CtInputs {
    DeviceBuffer x, scale;
    explicit CtInputs(const CtCase &c) : x(c.x.size(), c.x.data()), scale(4, &c.scale) {}
};
struct W8Inputs {
    DeviceBuffer x, w, scales, bias;
    explicit W8Inputs(const W8Case &c)
        : x(c.x.size(), c.x.data()), w(c.w.size(), c.w.data()), scales(c.scales.size(), c.scales.data()),
          bias(c.bias_values.size(), c.bias_values.data()) {}
};

// One thread's stream and output buffers, sized for the largest case.
struct ThreadState {
    cudaStream_t stream = nullptr;
    DeviceBuffer rows, cols, stats, y;
    ThreadState(size_t fp8_bytes, size_t y_bytes) : rows(fp8_bytes), cols(fp8_bytes), stats(8), y(y_bytes) {
        REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
    }
    ~ThreadState() { cudaStreamDestroy(stream); }
};

CtResult run(const CtCase &c, const CtInputs &in, ThreadState &t) {
    const size_t bytes = size_t(c.m * c.k);
    cudaMemsetAsync(t.rows.ptr, test::kPoison, bytes, t.stream);
    cudaMemsetAsync(t.cols.ptr, test::kPoison, bytes, t.stream);
    cudaMemsetAsync(t.stats.ptr, test::kPoison, 8, t.stream);
    CtResult r;
    float *amax = t.stats.as<float>();
    r.status = schedx_cast_transpose_fp8(in.x.ptr, c.m, c.k, c.k, c.dtype, in.scale.as<float>(), c.format,
                                         c.rows ? t.rows.as<uint8_t>() : nullptr, c.k,
                                         c.cols ? t.cols.as<uint8_t>() : nullptr, c.m, c.amax ? amax : nullptr,
                                         c.amax ? amax + 1 : nullptr, SCHEDX_DEVICE_CUDA, t.stream);
    const char *v = schedx_last_variant("cast_transpose");
    r.variant = v ? v : "";
    r.rows.resize(c.rows ? bytes : 0);
    r.cols.resize(c.cols ? bytes : 0);
    if (c.rows) cudaMemcpyAsync(r.rows.data(), t.rows.ptr, bytes, cudaMemcpyDeviceToHost, t.stream);
    if (c.cols) cudaMemcpyAsync(r.cols.data(), t.cols.ptr, bytes, cudaMemcpyDeviceToHost, t.stream);
    if (c.amax) {
        cudaMemcpyAsync(&r.amax, amax, 4, cudaMemcpyDeviceToHost, t.stream);
        cudaMemcpyAsync(&r.scale_inv, amax + 1, 4, cudaMemcpyDeviceToHost, t.stream);
    }
    if (cudaStreamSynchronize(t.stream) != cudaSuccess) r.status = SCHEDX_ERR_KERNEL;
    return r;
}

W8Result run(const W8Case &c, const W8Inputs &in, ThreadState &t) {
    const size_t bytes = size_t(c.m * c.n * 2);
    cudaMemsetAsync(t.y.ptr, test::kPoison, bytes, t.stream);
    W8Result r;
    r.status = schedx_w8_linear(in.x.ptr, c.m, c.k, c.k, c.x_dtype, in.w.as<int8_t>(), c.n, c.k, in.scales.ptr,
                                c.scales_dtype, c.bias ? in.bias.ptr : nullptr, t.y.ptr, c.n, SCHEDX_DEVICE_CUDA,
                                t.stream);
    const char *v = schedx_last_variant("w8_linear");
    r.variant = v ? v : "";
    r.y.resize(bytes);
    cudaMemcpyAsync(r.y.data(), t.y.ptr, bytes, cudaMemcpyDeviceToHost, t.stream);
    if (cudaStreamSynchronize(t.stream) != cudaSuccess) r.status = SCHEDX_ERR_KERNEL;
    return r;
}

}  // namespace

TEST_CASE("8 threads on 8 CUDA streams calling both operators match the serial run") {
    const auto B = SCHEDX_BF16;
    std::vector<CtCase> ct = ct_cases();
    std::vector<W8Case> w8 = w8_cases();
    // Aligned shapes, so that the tiled, GEMV and small-batch variants run too; ragged ones
    // that the tiles cover with shifted regions on each stream's side stream, with the fused
    // amax (1040 x 272, word tiles) and with the separate amax pass (500 x 512, element tiles).
    for (const CtCase &c : {CtCase{256, 512, B, SCHEDX_E4M3FN, true, true, true},
                            CtCase{512, 256, B, SCHEDX_E5M2, true, true, false},
                            CtCase{1040, 272, B, SCHEDX_E4M3FN, true, true, true},
                            CtCase{500, 512, B, SCHEDX_E4M3FN, true, true, true}}) {
        ct.push_back(c);
        ct.back().fill(uint32_t(50 + ct.size()));
    }
    // K = 1001 (odd): the element-I/O GEMV and small-batch kernels.
    for (const W8Case &c : {W8Case{1, 512, 1024, B, B, false}, W8Case{4, 256, 1024, B, B, false},
                            W8Case{8, 512, 512, B, B, true}, W8Case{16, 128, 1024, B, B, false},
                            W8Case{1, 256, 1001, B, B, false}, W8Case{5, 128, 1001, B, B, false}}) {
        w8.push_back(c);
        w8.back().fill(uint32_t(200 + w8.size()));
    }
    std::vector<std::unique_ptr<CtInputs>> ct_in;
    std::vector<std::unique_ptr<W8Inputs>> w8_in;
    size_t fp8_bytes = 0, y_bytes = 0;
    for (const CtCase &c : ct) {
        ct_in.push_back(std::make_unique<CtInputs>(c));
        fp8_bytes = std::max(fp8_bytes, size_t(c.m * c.k));
    }
    for (const W8Case &c : w8) {
        w8_in.push_back(std::make_unique<W8Inputs>(c));
        y_bytes = std::max(y_bytes, size_t(c.m * c.n * 2));
    }
    std::vector<std::unique_ptr<ThreadState>> threads;
    for (int t = 0; t < kThreads; t++) threads.push_back(std::make_unique<ThreadState>(fp8_bytes, y_bytes));

    std::vector<CtResult> ct_serial;
    std::vector<W8Result> w8_serial;
    for (size_t i = 0; i < ct.size(); i++) ct_serial.push_back(run(ct[i], *ct_in[i], *threads[0]));
    for (size_t i = 0; i < w8.size(); i++) w8_serial.push_back(run(w8[i], *w8_in[i], *threads[0]));
    std::set<std::string> variants;
    for (const CtResult &r : ct_serial) {
        REQUIRE(r.status == SCHEDX_OK);
        variants.insert(r.variant);
    }
    for (const W8Result &r : w8_serial) {
        REQUIRE(r.status == SCHEDX_OK);
        variants.insert(r.variant);
    }
    std::string ran;
    for (const std::string &v : variants) ran += " " + v;
    MESSAGE("variants exercised:" << ran);
    CHECK(variants.size() >= 6);

    Failures failures;
    on_threads(kIterations, [&](int t, int i) {
        const size_t c = size_t(t + i) % ct.size(), w = size_t(t + 3 * i) % w8.size();
        if (!(run(ct[c], *ct_in[c], *threads[size_t(t)]) == ct_serial[c])) {
            failures.add("cast_transpose case " + std::to_string(c));
        }
        if (!(run(w8[w], *w8_in[w], *threads[size_t(t)]) == w8_serial[w])) {
            failures.add("w8_linear case " + std::to_string(w));
        }
    });
    failures.report();
}

// torch.cuda.graph warms up on a side stream and captures on another, so the first call
// on the capture stream allocates its fused-amax workspace inside the capture: that must
// not invalidate the capture, each replay must compute amax (the memset that zeroes it is
// in the graph), and so must a call made on that stream outside the graph before any replay.
// Two fused-amax variants (forced).
TEST_CASE("a first call on a stream under CUDA graph capture") {
    // 272 x 208: whole tiles and three shifted regions, each on a side stream of its own.
    for (const std::pair<int64_t, int64_t> shape : {std::pair<int64_t, int64_t>{256, 256}, {272, 208}}) {
        const int64_t m = shape.first, k = shape.second;
        CAPTURE(m);
        CAPTURE(k);
        std::vector<uint16_t> x(size_t(m * k), 0x3F80);  // bf16 1.0
        x[size_t(m * k / 2 + 7)] = 0xC040;               // bf16 -3.0: amax 3
        std::vector<uint16_t> x5 = x;
        x5[size_t(m * k / 3)] = 0x40A0;  // bf16 5.0: amax 5
        const float one = 1.0f;
        DeviceBuffer dx(x.size() * 2, x.data()), dx5(x5.size() * 2, x5.data()), scale(4, &one), rows(size_t(m * k)),
            cols(size_t(m * k)), stats(8);
        for (const char *variant :
             {"cast_transpose_bf16_e4m3_t64r8w4_amax", "cast_transpose_bf16_e4m3_t64r4w8_amax"}) {
            CAPTURE(variant);
            REQUIRE(schedx_force_variant("cast_transpose", variant) == SCHEDX_OK);
            auto call = [&](const DeviceBuffer &in, cudaStream_t s) {
                return schedx_cast_transpose_fp8(in.ptr, m, k, k, SCHEDX_BF16, scale.as<float>(), SCHEDX_E4M3FN,
                                                 rows.as<uint8_t>(), k, cols.as<uint8_t>(), m, stats.as<float>(),
                                                 stats.as<float>() + 1, SCHEDX_DEVICE_CUDA, s);
            };
            auto stats_now = [&](cudaStream_t s) {
                REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
                std::pair<float, float> got;
                REQUIRE(cudaMemcpy(&got.first, stats.ptr, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
                REQUIRE(cudaMemcpy(&got.second, stats.as<float>() + 1, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
                // 3.4e38 until the next call writes: the atomic max would keep it if amax were not zeroed.
                REQUIRE(cudaMemset(stats.ptr, 0x7F, 8) == cudaSuccess);
                return got;
            };
            cudaStream_t s = nullptr;
            REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
            REQUIRE(cudaMemset(stats.ptr, 0x7F, 8) == cudaSuccess);
            REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
            const schedx_status st = call(dx, s);
            cudaGraph_t graph = nullptr;
            REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
            CHECK_MESSAGE(st == SCHEDX_OK, schedx_last_error());
            cudaGraphExec_t exec = nullptr;
            REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
            REQUIRE(call(dx5, s) == SCHEDX_OK);
            CHECK(stats_now(s) == std::make_pair(5.0f, 1.0f));
            for (int replay = 0; replay < 2; replay++) {
                REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
                CHECK(stats_now(s) == std::make_pair(3.0f, 1.0f));
            }
            REQUIRE(call(dx5, s) == SCHEDX_OK);
            CHECK(stats_now(s) == std::make_pair(5.0f, 1.0f));
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            cudaStreamDestroy(s);
        }
    }
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
}

// The GEMV launches with W in an L2 streaming window (a cuLaunchKernelEx attribute): the
// capture must record it and the replay compute y. x = 1 and integer W make y exact.
TEST_CASE("a GEMV under CUDA graph capture") {
    const int64_t n = 1024, k = 1024;  // K < 4N: the GEMV, not split-K
    std::vector<uint16_t> x(size_t(k), 0x3F80), scales(size_t(n), 0x3F80);  // bf16 1.0
    std::vector<int8_t> w(size_t(n * k));
    std::vector<float> want(size_t(n), 0.0f);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < k; j++) {
            w[size_t(i * k + j)] = int8_t((i * 7 + j * j) % 9 - 4);
            want[size_t(i)] += float(w[size_t(i * k + j)]);
        }
    }
    DeviceBuffer dx(x.size() * 2, x.data()), dw(w.size(), w.data()), ds(scales.size() * 2, scales.data()),
        dy(size_t(n) * 2);
    REQUIRE(cudaMemset(dy.ptr, 0xFF, size_t(n) * 2) == cudaSuccess);  // NaN until the replay writes
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    const schedx_status st = schedx_w8_linear(dx.ptr, 1, k, k, SCHEDX_BF16, dw.as<int8_t>(), n, k, ds.ptr, SCHEDX_BF16,
                                              nullptr, dy.ptr, n, SCHEDX_DEVICE_CUDA, s);
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
    CHECK_MESSAGE(st == SCHEDX_OK, schedx_last_error());
    const char *variant = schedx_last_variant("w8_linear");
    CHECK(std::string(variant ? variant : "none").find("gemv") != std::string::npos);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    std::vector<uint16_t> y(static_cast<size_t>(n));
    REQUIRE(cudaMemcpy(y.data(), dy.ptr, y.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    int wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += y[size_t(i)] != ref::float_to_bf16(want[size_t(i)]);
    CHECK(wrong == 0);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
}

int main(int argc, char **argv) {
    test::ignore_user_tuning_db();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
