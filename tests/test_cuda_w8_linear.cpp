// Every CUDA w8_linear variant, forced, against an fp64 reference: integer-valued inputs
// that must match bit for bit, random inputs within 1e-2, padded leading dimensions,
// poisoned outputs and guard bytes around every device buffer; then dispatch on ragged
// shapes. Exits 77 (ctest: skipped) without a CUDA device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "reference.h"
#include "test_util.h"

using test::Guarded;

namespace {

cudaStream_t test_stream = nullptr;

constexpr uint8_t kDeviceGuard = 0x5A;

// A device copy of a host buffer with kGuard guard bytes on each side inside the same
// allocation: compute-sanitizer only sees writes past the allocation, these show writes
// just past the buffer in a plain run too.
struct DeviceCopy {
    uint8_t *base = nullptr;
    Guarded *host;
    explicit DeviceCopy(Guarded *h) : host(h) {
        REQUIRE(cudaMalloc(reinterpret_cast<void **>(&base), h->size() + 2 * test::kGuard) == cudaSuccess);
        REQUIRE(cudaMemset(base, kDeviceGuard, h->size() + 2 * test::kGuard) == cudaSuccess);
        REQUIRE(cudaMemcpy(ptr(), h->data(), h->size(), cudaMemcpyHostToDevice) == cudaSuccess);
    }
    ~DeviceCopy() { cudaFree(base); }
    uint8_t *ptr() { return base + test::kGuard; }
    void back() { REQUIRE(cudaMemcpy(host->data(), ptr(), host->size(), cudaMemcpyDeviceToHost) == cudaSuccess); }
    bool guards_intact() {
        std::vector<uint8_t> g(test::kGuard);
        for (size_t off : {size_t(0), test::kGuard + host->size()}) {
            REQUIRE(cudaMemcpy(g.data(), base + off, g.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
            if (std::any_of(g.begin(), g.end(), [](uint8_t b) { return b != kDeviceGuard; })) return false;
        }
        return true;
    }
};

std::map<std::string, std::string> params_of(const schedx_variant_info &info) {
    std::map<std::string, std::string> out;
    std::istringstream words(info.params);
    std::string kv;
    while (words >> kv) out[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    return out;
}

// Finite fp16 values by code (0..0x7BFF): the fp16 reference rounds by nearest-value
// search, independent of the generators' bit arithmetic (as the CPU test does).
const std::vector<double> &fp16_values() {
    static std::vector<double> v = [] {
        std::vector<double> out;
        for (uint32_t c = 0; c <= 0x7BFF; c++) out.push_back(ref::fp16_to_float(uint16_t(c)));
        return out;
    }();
    return v;
}

// Round-to-nearest-even of an exact value to the output dtype's bits.
uint16_t round_to_half(double v, schedx_dtype t) {
    if (t == SCHEDX_BF16) {
        // Exact integers and small dyadic values fit a float; float_to_bf16 rounds by bits.
        return ref::float_to_bf16(float(v));
    }
    const std::vector<double> &vals = fp16_values();
    const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    const double a = std::fabs(v);
    if (a >= 65520.0) return sign | 0x7C00;
    auto hi = std::lower_bound(vals.begin(), vals.end(), a);
    uint32_t code = uint32_t(hi - vals.begin());
    if (*hi != a && code > 0) {
        const double d_hi = *hi - a, d_lo = a - vals[code - 1];
        if (d_lo < d_hi || (d_lo == d_hi && ((code - 1) & 1) == 0)) code -= 1;
    }
    return uint16_t(code) | sign;
}

double half_value(uint16_t bits, schedx_dtype t) {
    return t == SCHEDX_BF16 ? ref::bf16_to_float(bits) : ref::fp16_to_float(bits);
}

uint32_t hash(int64_t a, int64_t b, uint32_t salt) { return test::mix(uint32_t(a * 7919 + b) ^ salt); }

// Inputs are pure functions of their coordinates, so each matrix and the fp64 products
// are made once per process and shared by all variants, dtypes and both stream passes:
// the reference for the large shapes dominates the run time otherwise.
// Integer x lies in [-3, 3] (exact in bf16 and fp16, so its products do not depend on the
// dtype); random x in [-4, 4] rounded to the dtype.
const std::vector<uint16_t> &x_bits(int64_t m, int64_t k, schedx_dtype xt, bool integer) {
    static std::map<std::tuple<int64_t, int64_t, schedx_dtype, bool>, std::vector<uint16_t>> cache;
    std::vector<uint16_t> &x = cache[{m, k, xt, integer}];
    if (x.empty()) {
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < k; j++) {
                const uint32_t r = hash(i, j, integer ? 1 : 0x9E3779B8u);
                x.push_back(round_to_half(integer ? double(int(r % 7) - 3) : double(int(r % 20001) - 10000) / 2500.0, xt));
            }
        }
    }
    return x;
}

const std::vector<int8_t> &w_values(int64_t n, int64_t k) {
    static std::map<std::pair<int64_t, int64_t>, std::vector<int8_t>> cache;
    std::vector<int8_t> &w = cache[{n, k}];
    if (w.empty()) {
        for (int64_t i = 0; i < n; i++) {
            for (int64_t j = 0; j < k; j++) w.push_back(int8_t(int(hash(i, j, 2) % 255) - 127));
        }
    }
    return w;
}

// sum_k x[i][k] * W[j][k] in fp64 (exact for integer inputs).
const std::vector<double> &products(int64_t m, int64_t n, int64_t k, schedx_dtype xt, bool integer) {
    static std::map<std::tuple<int64_t, int64_t, int64_t, schedx_dtype, bool>, std::vector<double>> cache;
    std::vector<double> &out = cache[{m, n, k, integer ? SCHEDX_BF16 : xt, integer}];
    if (out.empty()) {
        const std::vector<uint16_t> &xb = x_bits(m, k, xt, integer);
        const std::vector<int8_t> &w = w_values(n, k);
        std::vector<double> xv(xb.size());
        for (size_t i = 0; i < xb.size(); i++) xv[i] = half_value(xb[i], xt);
        out.resize(size_t(m) * n);
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                const double *xr = &xv[i * k];
                const int8_t *wr = &w[j * k];
                // Four independent sums: the loop is latency-bound on one.
                double s[4] = {0, 0, 0, 0};
                int64_t q = 0;
                for (; q + 4 <= k; q += 4) {
                    for (int t = 0; t < 4; t++) s[t] += xr[q + t] * wr[q + t];
                }
                for (; q < k; q++) s[0] += xr[q] * wr[q];
                out[i * n + j] = (s[0] + s[1]) + (s[2] + s[3]);
            }
        }
    }
    return out;
}

struct W8Case {
    int64_t m, n, k;
    int64_t ldx = 0, ldw = 0, ldy = 0;  // 0: tight
    schedx_dtype x_dtype = SCHEDX_BF16, scales_dtype = SCHEDX_BF16;
    bool bias = false;
    bool integer = true;  // integer inputs, power-of-two scales: results must be exact
};

struct W8Result {
    std::string error;   // "" on success
    double max_rel = 0;  // largest elementwise relative error (random cases)
};

// One call on test_stream through guarded device copies, checked element by element.
W8Result check_w8(W8Case c) {
    if (!c.ldx) c.ldx = c.k;
    if (!c.ldw) c.ldw = c.k;
    if (!c.ldy) c.ldy = c.n;
    const int sb = c.scales_dtype == SCHEDX_FP32 ? 4 : 2;
    Guarded x(size_t(c.m) * c.ldx * 2, 0), w(size_t(c.n) * c.ldw, 0), scales(size_t(c.n) * sb),
        bias(size_t(c.n) * sb), y(size_t(c.m) * c.ldy * 2);
    const std::vector<uint16_t> &xb = x_bits(c.m, c.k, c.x_dtype, c.integer);
    const std::vector<int8_t> &wv = w_values(c.n, c.k);
    // Row padding holds inf in x and 127 in W, which would show in y if it were read.
    const uint16_t x_pad = c.x_dtype == SCHEDX_BF16 ? 0x7F80 : 0x7C00;
    for (int64_t i = 0; i < c.m; i++) {
        uint16_t *row = x.as<uint16_t>() + i * c.ldx;
        std::copy(xb.begin() + i * c.k, xb.begin() + (i + 1) * c.k, row);
        std::fill(row + c.k, row + c.ldx, x_pad);
    }
    for (int64_t i = 0; i < c.n; i++) {
        int8_t *row = w.as<int8_t>() + i * c.ldw;
        std::copy(wv.begin() + i * c.k, wv.begin() + (i + 1) * c.k, row);
        std::fill(row + c.k, row + c.ldw, int8_t(127));
    }
    std::vector<double> sv(c.n), bv(c.n, 0.0);
    for (int64_t i = 0; i < c.n; i++) {
        const uint32_t r = hash(i, 0, c.integer ? 3 : 4);
        double s = c.integer ? std::ldexp(1.0, int(r % 4) - 2) : (1.0 + double(r % 1000) / 1000.0) * 1e-2;
        double b = c.integer ? double(int(r % 101) - 50) : double(int(r % 2001) - 1000) / 100.0;
        if (c.scales_dtype == SCHEDX_BF16) {
            const uint16_t sbits = ref::float_to_bf16(float(s)), bbits = ref::float_to_bf16(float(b));
            std::memcpy(scales.data() + i * 2, &sbits, 2);
            std::memcpy(bias.data() + i * 2, &bbits, 2);
            s = ref::bf16_to_float(sbits);
            b = ref::bf16_to_float(bbits);
        } else {
            const float sf = float(s), bf = float(b);
            std::memcpy(scales.data() + i * 4, &sf, 4);
            std::memcpy(bias.data() + i * 4, &bf, 4);
            s = sf;
            b = bf;
        }
        sv[i] = s;
        if (c.bias) bv[i] = b;
    }

    W8Result res;
    std::ostringstream err;
    DeviceCopy dx(&x), dw(&w), ds(&scales), db(&bias), dy(&y);
    // The uploads ran on the legacy default stream, which a non-blocking stream does not
    // wait for.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    const schedx_status st =
        schedx_w8_linear(dx.ptr(), c.m, c.k, c.ldx, c.x_dtype, reinterpret_cast<int8_t *>(dw.ptr()), c.n, c.ldw,
                         ds.ptr(), c.scales_dtype, c.bias ? db.ptr() : nullptr, dy.ptr(), c.ldy, SCHEDX_DEVICE_CUDA,
                         test_stream);
    if (st != SCHEDX_OK) {
        err << "status " << st << ": " << schedx_last_error();
        res.error = err.str();
        return res;
    }
    REQUIRE(cudaStreamSynchronize(test_stream) == cudaSuccess);
    dy.back();

    const std::vector<double> &dot = products(c.m, c.n, c.k, c.x_dtype, c.integer);
    double max_abs = 0;
    for (int64_t j = 0; j < c.m * c.n; j++) max_abs = std::max(max_abs, std::fabs(dot[j] * sv[j % c.n] + bv[j % c.n]));
    for (int64_t i = 0; i < c.m; i++) {
        for (int64_t j = 0; j < c.n; j++) {
            uint16_t got;
            std::memcpy(&got, y.data() + (i * c.ldy + j) * 2, 2);
            const double ref_v = dot[i * c.n + j] * sv[j] + bv[j];
            if (c.integer) {
                const uint16_t exact = round_to_half(ref_v, c.x_dtype);
                if (got != exact) {
                    err << "at (" << i << ", " << j << "): want 0x" << std::hex << exact << " (" << ref_v << ") got 0x"
                        << got << std::dec << " (" << half_value(got, c.x_dtype) << ")";
                    res.error = err.str();
                    return res;
                }
            } else {
                // Relative to the element, floored at 1e-3 of the output's range so that
                // outputs near zero (cancellation) do not dominate.
                const double rel =
                    std::fabs(half_value(got, c.x_dtype) - ref_v) / std::max(std::fabs(ref_v), 1e-3 * max_abs);
                if (!(rel <= 1e-2)) {
                    err << "at (" << i << ", " << j << "): want " << ref_v << " got " << half_value(got, c.x_dtype)
                        << " relative error " << rel;
                    res.error = err.str();
                    return res;
                }
                res.max_rel = std::max(res.max_rel, rel);
            }
        }
        for (int64_t j = c.n * 2; j < c.ldy * 2; j++) {
            if (y.data()[i * c.ldy * 2 + j] != test::kPoison) {
                res.error = "y padding written";
                return res;
            }
        }
    }
    for (DeviceCopy *d : {&dx, &dw, &ds, &db, &dy}) {
        if (!d->guards_intact()) res.error = "device guard bytes overwritten";
    }
    return res;
}

struct Shape {
    int64_t m, n, k;
};

// Mirrors can_run in runtime/w8_linear.cpp (with the 16-byte alignment that padded()
// keeps for these schedules), restricted to shapes whose reference stays cheap.
std::vector<Shape> shapes_for(std::map<std::string, std::string> &p) {
    const std::string s = p["schedule"];
    const bool cublas = p["stage"] == "dequantize";
    const int64_t step = 128 * (p.count("load_words") ? std::stoll(p["load_words"]) : 4);
    const int64_t batch = p.count("batch") ? std::stoll(p["batch"]) : 1;
    const int64_t split = p.count("split_k") ? std::stoll(p["split_k"]) : 8;
    std::vector<Shape> out;
    for (int64_t m : {1, 2, 3, 5, 8, 16, 17, 64, 300}) {
        for (int64_t n : {1, 64, 4096}) {
            for (int64_t k : {4096, 1000}) {
                bool runs = true;
                if (cublas) runs = m > 16 && k % 16 == 0;
                else if (s == "cuda_gemv") runs = m == 1 && k % step == 0;
                else if (s == "cuda_smallbatch") runs = m <= batch && k % step == 0;
                else if (s == "cuda_splitk") runs = m == 1 && n <= 1024 && k % (step * split) == 0;
                if (runs && m * n * k <= 16 * 4096 * 4096) out.push_back({m, n, k});
            }
        }
    }
    // A prefill-sized cuBLAS call (the reference is computed once for all eight kinds).
    if (cublas) out.push_back({300, 1000, 4096});
    return out;
}

// Padded leading dimensions: odd for the general schedule, which takes any; 16-byte row
// pitches for x and W where the schedule needs them (cuBLAS itself takes any ldx).
W8Case padded(W8Case c, const std::string &schedule, bool cublas) {
    const bool aligned_x = schedule != "cuda_general" && !cublas;
    const bool aligned_w = schedule != "cuda_general";
    c.ldx = c.k + (aligned_x ? 8 : 1);
    c.ldw = c.k + (aligned_w ? 16 : 3);
    c.ldy = c.n + 3;
    return c;
}

std::string schedule_of_last() {
    const char *last = schedx_last_variant("w8_linear");
    for (int i = 0; last && i < schedx_variant_count(); i++) {
        schedx_variant_info info;
        schedx_get_variant(i, &info);
        if (std::string(info.name) == last) return params_of(info)["schedule"];
    }
    return "none";
}

}  // namespace

TEST_CASE("every CUDA w8_linear variant, forced, against the fp64 reference") {
    int checked = 0;
    double worst = 0;
    for (int i = 0; i < schedx_variant_count(); i++) {
        schedx_variant_info info;
        REQUIRE(schedx_get_variant(i, &info) == SCHEDX_OK);
        // The op filter also leaves out w8_linear_epilogue, the cuBLAS path's helper.
        if (std::string(info.op) != "w8_linear" || std::string(info.device) != "cuda") continue;
        auto p = params_of(info);
        const bool cublas = p["stage"] == "dequantize";
        const schedx_dtype xt = p["x_type"] == "fp16" ? SCHEDX_FP16 : SCHEDX_BF16;
        // The cuBLAS path serves every scale dtype and bias setting through its epilogue.
        std::vector<std::pair<schedx_dtype, bool>> kinds;
        if (cublas) {
            kinds = {{SCHEDX_BF16, false}, {SCHEDX_BF16, true}, {SCHEDX_FP32, false}, {SCHEDX_FP32, true}};
        } else {
            kinds = {{p["scale_type"] == "fp32" ? SCHEDX_FP32 : SCHEDX_BF16, p["with_bias"] == "true"}};
        }
        CAPTURE(info.name);
        REQUIRE(schedx_force_variant("w8_linear", info.name) == SCHEDX_OK);
        for (auto kind : kinds) {
            for (Shape s : shapes_for(p)) {
                CAPTURE(kind.first);
                CAPTURE(kind.second);
                CAPTURE(s.m);
                CAPTURE(s.n);
                CAPTURE(s.k);
                W8Case c{s.m, s.n, s.k, 0, 0, 0, xt, kind.first, kind.second, true};
                CHECK(check_w8(padded(c, p["schedule"], cublas)).error == "");
                const char *last = schedx_last_variant("w8_linear");
                CHECK(std::string(last ? last : "none") == info.name);
                // Random values at tight leading dimensions; N = 4096 only changes how
                // many outputs there are, which the integer case covers.
                if (s.n <= 64) {
                    c.integer = false;
                    const W8Result r = check_w8(c);
                    CHECK(r.error == "");
                    worst = std::max(worst, r.max_rel);
                }
            }
            if (p["schedule"] != "cuda_general") {
                // K = 1000 fits none of the fast paths: forcing one is refused, not run.
                W8Case c{1, 64, 1000, 0, 0, 0, xt, kind.first, kind.second, true};
                CHECK(check_w8(c).error.find("status 11") == 0);
            }
        }
        checked++;
    }
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    CHECK(checked >= 35);
    MESSAGE("w8_linear CUDA: largest elementwise relative error against fp64: " << worst);
    CHECK(worst <= 1e-2);
}

TEST_CASE("dispatch runs ragged shapes on the general variant") {
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
    // K off the fast paths' steps, odd row pitches of x or W, and (for M > 16) K not a
    // multiple of 16, which the cuBLAS path needs.
    const W8Case cases[] = {
        {5, 64, 1000},
        {1, 64, 4096, 4097},
        {3, 64, 4096, 0, 4099, 67},
        {16, 4096, 1000},
        {17, 64, 1000},
        {300, 64, 1000, 1003, 1001, 65},
    };
    int idx = 0;
    for (W8Case c : cases) {
        c.x_dtype = idx % 2 ? SCHEDX_FP16 : SCHEDX_BF16;
        c.scales_dtype = idx % 3 ? SCHEDX_FP32 : SCHEDX_BF16;
        c.bias = idx % 2 == 0;
        idx++;
        CAPTURE(c.m);
        CAPTURE(c.n);
        CAPTURE(c.k);
        CAPTURE(c.ldx);
        CAPTURE(c.ldw);
        CHECK(check_w8(c).error == "");
        CHECK(schedule_of_last() == "cuda_general");
    }
}

int main(int argc, char **argv) {
    test::ignore_user_tuning_db();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        std::printf("SKIPPED: no CUDA device\n");
        return 77;
    }
    doctest::Context ctx(argc, argv);
    // Run once on the legacy default stream and once on a non-blocking stream.
    int r = ctx.run();
    cudaStreamCreateWithFlags(&test_stream, cudaStreamNonBlocking);
    r |= ctx.run();
    return r;
}
