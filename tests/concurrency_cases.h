// The cases, results and thread harness shared by the CPU (test_concurrency.cpp) and
// CUDA (test_cuda_concurrency.cpp) concurrency tests: eight cast_transpose and eight
// w8_linear calls of different shapes, dtypes and output sets, inputs a pure function of
// their index.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "reference.h"
#include "test_util.h"

namespace concurrency {

constexpr int kThreads = 8;

// Inputs are a pure function of (i, j, salt).
inline uint32_t at(int64_t i, int64_t j, uint32_t salt) { return test::mix(uint32_t(i * 7919 + j) ^ salt); }

struct CtCase {
    int64_t m, k;
    schedx_dtype dtype;
    schedx_fp8_format format;
    bool rows, cols, amax;
    std::vector<uint8_t> x;
    float scale;

    void fill(uint32_t salt) {
        const int eb = dtype == SCHEDX_FP32 ? 4 : 2;
        x.resize(size_t(m * k * eb));
        scale = 0.25f * float(1 + salt % 8);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < k; j++) {
                const uint32_t h = at(i, j, salt);
                const float v = std::ldexp(float(h % 2000) - 1000.0f, int((h >> 12) % 16) - 10);
                const uint32_t bits = dtype == SCHEDX_FP32   ? ref::float_to_bits(v)
                                      : dtype == SCHEDX_BF16 ? ref::float_to_bf16(v)
                                                             : uint32_t(h & 0x7BFF);  // finite fp16
                std::memcpy(x.data() + (i * k + j) * eb, &bits, eb);
            }
        }
    }
};

// What one call produced, and which variant ran it.
struct CtResult {
    schedx_status status;
    std::vector<uint8_t> rows, cols;
    float amax = 0, scale_inv = 0;
    std::string variant;
    bool operator==(const CtResult &o) const {
        return status == o.status && rows == o.rows && cols == o.cols &&
               std::memcmp(&amax, &o.amax, 4) == 0 && std::memcmp(&scale_inv, &o.scale_inv, 4) == 0 &&
               variant == o.variant;
    }
};

struct W8Case {
    int64_t m, n, k;
    schedx_dtype x_dtype, scales_dtype;
    bool bias;
    std::vector<uint8_t> x, scales, bias_values;
    std::vector<int8_t> w;

    void fill(uint32_t salt) {
        const int sb = scales_dtype == SCHEDX_FP32 ? 4 : 2;
        x.resize(size_t(m * k * 2));
        w.resize(size_t(n * k));
        scales.resize(size_t(n * sb));
        bias_values.resize(size_t(n * sb));
        for (int64_t i = 0; i < m * k; i++) {
            const float v = float(int(at(i, 0, salt) % 2001) - 1000) / 256.0f;
            const uint16_t bits = x_dtype == SCHEDX_BF16 ? ref::float_to_bf16(v) : uint16_t(at(i, 1, salt) & 0x3BFF);
            std::memcpy(x.data() + i * 2, &bits, 2);
        }
        for (int64_t i = 0; i < n * k; i++) w[i] = int8_t(int(at(i, 2, salt) % 255) - 127);
        for (int64_t i = 0; i < n; i++) {
            const float s = std::ldexp(1.0f + float(at(i, 3, salt) % 100) / 100.0f, -8);
            const float b = float(int(at(i, 4, salt) % 201) - 100) / 8.0f;
            if (sb == 4) {
                std::memcpy(scales.data() + i * 4, &s, 4);
                std::memcpy(bias_values.data() + i * 4, &b, 4);
            } else {
                const uint16_t s16 = ref::float_to_bf16(s), b16 = ref::float_to_bf16(b);
                std::memcpy(scales.data() + i * 2, &s16, 2);
                std::memcpy(bias_values.data() + i * 2, &b16, 2);
            }
        }
    }
};

struct W8Result {
    schedx_status status;
    std::vector<uint8_t> y;
    std::string variant;
    bool operator==(const W8Result &o) const { return status == o.status && y == o.y && variant == o.variant; }
};

inline std::vector<CtCase> ct_cases() {
    const auto B = SCHEDX_BF16, H = SCHEDX_FP16, F = SCHEDX_FP32;
    const auto E4 = SCHEDX_E4M3FN, E5 = SCHEDX_E5M2;
    std::vector<CtCase> cases{{33, 65, B, E4, true, true, true},  {64, 64, H, E5, true, false, false},
                              {17, 200, F, E4, false, true, true}, {128, 96, B, E5, true, true, false},
                              {1, 1000, H, E4, true, true, true},  {1000, 1, B, E4, true, false, false},
                              {96, 128, F, E5, true, true, true},  {5, 7, B, E4, false, true, false}};
    for (size_t i = 0; i < cases.size(); i++) cases[i].fill(uint32_t(i));
    return cases;
}

inline std::vector<W8Case> w8_cases() {
    const auto B = SCHEDX_BF16, H = SCHEDX_FP16, F = SCHEDX_FP32;
    std::vector<W8Case> cases{{1, 64, 256, B, B, false}, {4, 33, 100, H, F, true}, {16, 128, 64, B, F, true},
                              {7, 9, 300, H, B, false},  {2, 256, 128, B, B, true}, {33, 17, 65, H, F, false},
                              {1, 40, 512, H, B, true},  {9, 64, 64, B, F, false}};
    for (size_t i = 0; i < cases.size(); i++) cases[i].fill(uint32_t(100 + i));
    return cases;
}

// Runs body(thread, iteration) on kThreads threads, released together.
template <typename Body> void on_threads(int iterations, Body body) {
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            ready++;
            while (ready.load() < kThreads) std::this_thread::yield();
            for (int i = 0; i < iterations; i++) body(t, i);
        });
    }
    for (std::thread &th : threads) th.join();
}

// Failures seen on worker threads, reported by the test's thread (doctest asserts there).
class Failures {
public:
    void add(const std::string &what) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (list_.size() < 10) list_.push_back(what);
        count_++;
    }
    void report() const {
        for (const std::string &f : list_) MESSAGE(f);
        CHECK(count_ == 0);
    }

private:
    std::mutex mutex_;
    std::vector<std::string> list_;
    size_t count_ = 0;
};

}  // namespace concurrency
