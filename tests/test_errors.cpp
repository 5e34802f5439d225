// Bad arguments at the C ABI: every case returns its own status, names the argument in
// schedx_last_error(), and touches no memory: outputs keep their poison, inputs their
// values, and every buffer its guard bytes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "pipeline_call.h"
#include "registry.h"
#include "stmt_text.h"
#include "test_util.h"

using test::Guarded;

namespace {

constexpr int64_t kHuge = int64_t(1) << 40;     // a dimension past Halide's 2^31-1
constexpr int64_t kOverflow = int64_t(1) << 62;  // rows * ld * element bytes past 2^64
// Three rows this far apart span more than 2^31-1 elements although each number fits.
constexpr int64_t kWideLd = 1000000000;

struct Expect {
    schedx_status status;
    std::string message;  // a fragment schedx_last_error() must contain: names the argument
};

// Each buffer's bytes before the call; after a failed call all must be as they were.
class Snapshot {
public:
    explicit Snapshot(std::vector<Guarded *> buffers) : buffers_(std::move(buffers)) {
        for (Guarded *g : buffers_) before_.emplace_back(g->data(), g->data() + g->size());
    }
    std::string changed() const {
        for (size_t i = 0; i < buffers_.size(); i++) {
            if (std::memcmp(buffers_[i]->data(), before_[i].data(), before_[i].size()) != 0) {
                return "buffer " + std::to_string(i) + " was written";
            }
            if (!buffers_[i]->guards_intact()) return "guard bytes of buffer " + std::to_string(i) + " overwritten";
        }
        return "";
    }

private:
    std::vector<Guarded *> buffers_;
    std::vector<std::vector<uint8_t>> before_;
};

void check_failure(schedx_status got, const Expect &want, const Snapshot &snap) {
    CHECK(got == want.status);
    const std::string msg = schedx_last_error();
    CAPTURE(msg);
    CHECK(msg.find(want.message) != std::string::npos);
    CHECK(snap.changed() == "");
}

// x of every case below: 4 x 8 bf16 ones.
void fill_bf16_ones(Guarded &x) {
    for (size_t i = 0; i + 2 <= x.size(); i += 2) std::memcpy(x.data() + i, "\x80\x3F", 2);
}

// Arguments of one cast_transpose call on 4 x 8 bf16 ones into poisoned outputs.
struct CtArgs {
    Guarded xb{4 * 8 * 2}, scaleb{4}, rowsb{4 * 8}, colsb{8 * 4}, amaxb{4}, scale_invb{4};
    const void *x;
    int64_t m = 4, k = 8, ldx = 8;
    schedx_dtype dtype = SCHEDX_BF16;
    const float *scale;
    schedx_fp8_format format = SCHEDX_E4M3FN;
    uint8_t *rows;
    int64_t ld_rows = 8;
    uint8_t *cols;
    int64_t ld_cols = 4;
    float *amax, *scale_inv;
    schedx_device device = SCHEDX_DEVICE_CPU;

    CtArgs() {
        fill_bf16_ones(xb);
        const float one = 1.0f;
        std::memcpy(scaleb.data(), &one, 4);
        x = xb.data();
        scale = scaleb.as<float>();
        rows = rowsb.data();
        cols = colsb.data();
        amax = amaxb.as<float>();
        scale_inv = scale_invb.as<float>();
    }
    schedx_status call() const {
        return schedx_cast_transpose_fp8(x, m, k, ldx, dtype, scale, format, rows, ld_rows, cols, ld_cols, amax,
                                         scale_inv, device, nullptr);
    }
    Snapshot snapshot() { return Snapshot({&xb, &scaleb, &rowsb, &colsb, &amaxb, &scale_invb}); }
};

// The same buffers for schedx_cast_transpose_fp8_current_scaling, where scale is an output.
struct CurrentScalingArgs : CtArgs {
    int pow2_scales = 0;
    schedx_status call() const {
        return schedx_cast_transpose_fp8_current_scaling(x, m, k, ldx, dtype, format, pow2_scales, rows, ld_rows, cols,
                                                         ld_cols, amax, const_cast<float *>(scale), scale_inv, device,
                                                         nullptr);
    }
};

// The same buffers for schedx_cast_transpose_fp8_divide, scale as the divisor (amax unused).
struct DivideArgs : CtArgs {
    schedx_status call() const {
        return schedx_cast_transpose_fp8_divide(x, m, k, ldx, dtype, scale, format, rows, ld_rows, cols, ld_cols,
                                                device, nullptr);
    }
};

// Arguments of one w8_linear call: y[2][4] from x[2][8] and W[4][8], into poison.
struct W8Args {
    Guarded xb{2 * 8 * 2}, wb{4 * 8}, scalesb{4 * 4}, biasb{4 * 4}, yb{2 * 4 * 2};
    const void *x;
    int64_t m = 2, k = 8, ldx = 8;
    schedx_dtype x_dtype = SCHEDX_BF16;
    const int8_t *w;
    int64_t n = 4, ldw = 8;
    const void *scales;
    schedx_dtype scales_dtype = SCHEDX_BF16;
    const void *bias;
    void *y;
    int64_t ldy = 4;
    schedx_device device = SCHEDX_DEVICE_CPU;

    W8Args() {
        for (int i = 0; i < 16; i++) std::memcpy(xb.data() + 2 * i, "\x80\x3F", 2);  // bf16 1.0
        std::memset(wb.data(), 1, wb.size());
        for (int i = 0; i < 8; i++) std::memcpy(scalesb.data() + 2 * i, "\x80\x3F", 2);
        std::memset(biasb.data(), 0, biasb.size());
        x = xb.data();
        w = wb.as<int8_t>();
        scales = scalesb.data();
        bias = biasb.data();
        y = yb.data();
    }
    schedx_status call() const {
        return schedx_w8_linear(x, m, k, ldx, x_dtype, w, n, ldw, scales, scales_dtype, bias, y, ldy, device, nullptr);
    }
    Snapshot snapshot() { return Snapshot({&xb, &wb, &scalesb, &biasb, &yb}); }
};

// Arguments of one abs_max call over 4 x 8 bf16 ones into a poisoned amax.
struct AbsMaxArgs {
    Guarded xb{4 * 8 * 2}, amaxb{4};
    const void *x;
    int64_t m = 4, k = 8, ldx = 8;
    schedx_dtype dtype = SCHEDX_BF16;
    float *amax;
    schedx_device device = SCHEDX_DEVICE_CPU;

    AbsMaxArgs() {
        fill_bf16_ones(xb);
        x = xb.data();
        amax = amaxb.as<float>();
    }
    schedx_status call() const { return schedx_abs_max(x, m, k, ldx, dtype, amax, device, nullptr); }
    Snapshot snapshot() { return Snapshot({&xb, &amaxb}); }
};

// Arguments of one 1x128-block quantize_fp8 call of 4 x 8 bf16 ones into poisoned outputs;
// rows_scale is [ceil(8/128)][pad4(4)] floats, cols_scale [ceil(4/128)][pad4(8)].
struct QuantizeArgs {
    Guarded xb{4 * 8 * 2}, rowsb{4 * 8}, colsb{8 * 4}, rows_scaleb{1 * 4 * 4}, cols_scaleb{1 * 8 * 4};
    const void *x;
    int64_t m = 4, k = 8, ldx = 8;
    schedx_dtype dtype = SCHEDX_BF16;
    schedx_quantize_fp8_options opt{SCHEDX_RECIPE_BLOCK_1X128, SCHEDX_E4M3FN, 0, 0.0f, SCHEDX_MX_FLOOR};
    const schedx_quantize_fp8_options *options = &opt;
    uint8_t *rows;
    int64_t ld_rows = 8;
    void *rows_scale;
    uint8_t *cols;
    int64_t ld_cols = 4;
    void *cols_scale;
    schedx_device device = SCHEDX_DEVICE_CPU;

    QuantizeArgs() {
        fill_bf16_ones(xb);
        x = xb.data();
        rows = rowsb.data();
        rows_scale = rows_scaleb.data();
        cols = colsb.data();
        cols_scale = cols_scaleb.data();
    }
    schedx_status call() const {
        return schedx_quantize_fp8(x, m, k, ldx, dtype, options, rows, ld_rows, rows_scale, cols, ld_cols, cols_scale,
                                   device, nullptr);
    }
    Snapshot snapshot() { return Snapshot({&xb, &rowsb, &colsb, &rows_scaleb, &cols_scaleb}); }
};

template <typename Args> struct Case {
    const char *what;
    std::function<void(Args &)> change;
    Expect expect;
};

template <typename Args> void run_cases(const std::vector<Case<Args>> &cases) {
    for (const Case<Args> &c : cases) {
        const std::string what = c.what;
        CAPTURE(what);
        Args a;
        c.change(a);
        const Snapshot snap = a.snapshot();
        check_failure(a.call(), c.expect, snap);
    }
}

// Without a driver the call says so; with one, host memory is not device memory.
void check_cuda_with_host_pointers(schedx_status got, const char *first_pointer) {
    const std::string msg = schedx_last_error();
    CAPTURE(msg);
    if (got == SCHEDX_ERR_NO_CUDA) {
        CHECK(msg.find("CUDA") != std::string::npos);
    } else {
        CHECK(got == SCHEDX_ERR_POINTER_DEVICE);
        CHECK(msg.find(std::string(first_pointer) + " is not CUDA device memory") == 0);
    }
}

// An operator's valid host-memory call sent to the CUDA device is refused without
// touching its buffers; the same call on the CPU succeeds.
template <typename Args>
void check_cuda_refused_cpu_works() {
    Args a;
    a.device = SCHEDX_DEVICE_CUDA;
    const Snapshot snap = a.snapshot();
    check_cuda_with_host_pointers(a.call(), "x");
    CHECK(snap.changed() == "");
    Args cpu;
    CHECK(cpu.call() == SCHEDX_OK);
}

}  // namespace

TEST_CASE("cast_transpose: the valid call these cases start from succeeds and writes every output") {
    CtArgs a;
    REQUIRE(a.call() == SCHEDX_OK);
    CHECK(std::string(schedx_last_error()) == "");
    CHECK(a.rowsb.data()[31] == 0x38);  // e4m3fn 1.0
    CHECK(a.colsb.data()[31] == 0x38);
    CHECK(*a.amax == 1.0f);
    CHECK(*a.scale_inv == 1.0f);
}

TEST_CASE("cast_transpose: each bad argument has its status and message, and nothing is written") {
    using C = Case<CtArgs>;
    const int64_t wide_m = 3;
    run_cases<CtArgs>({
        C{"x NULL", [](CtArgs &a) { a.x = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "x is NULL"}},
        C{"scale NULL", [](CtArgs &a) { a.scale = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "scale is NULL"}},
        C{"rows and cols NULL", [](CtArgs &a) { a.rows = a.cols = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "rows and cols are both NULL"}},
        C{"amax without scale_inv", [](CtArgs &a) { a.scale_inv = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "amax and scale_inv"}},
        C{"scale_inv without amax", [](CtArgs &a) { a.amax = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "amax and scale_inv"}},
        C{"m negative", [](CtArgs &a) { a.m = -1; }, {SCHEDX_ERR_BAD_SIZE, "m must not be negative, got -1"}},
        C{"k negative", [](CtArgs &a) { a.k = -3; }, {SCHEDX_ERR_BAD_SIZE, "k must not be negative, got -3"}},
        C{"m most negative", [](CtArgs &a) { a.m = INT64_MIN; }, {SCHEDX_ERR_BAD_SIZE, "m must not be negative"}},
        C{"empty x, scale NULL", [](CtArgs &a) { a.m = 0, a.scale = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "scale is NULL"}},
        C{"empty x, amax without scale_inv", [](CtArgs &a) { a.k = 0, a.scale_inv = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "amax and scale_inv"}},
        C{"empty x, ld_cols negative", [](CtArgs &a) { a.k = 0, a.ld_cols = -1; },
          {SCHEDX_ERR_BAD_LEADING_DIM, "ld_cols (-1) is smaller than m (4)"}},
        C{"empty x, format", [](CtArgs &a) { a.m = 0, a.format = schedx_fp8_format(2); },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "format 2"}},
        C{"empty x, amax over scale", [](CtArgs &a) { a.m = 0, a.amax = const_cast<float *>(a.scale); },
          {SCHEDX_ERR_OVERLAP, "output amax overlaps scale"}},
        C{"ldx < k", [](CtArgs &a) { a.ldx = 7; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldx (7) is smaller than k (8)"}},
        C{"ldx negative", [](CtArgs &a) { a.ldx = -8; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldx (-8)"}},
        C{"ld_rows < k", [](CtArgs &a) { a.ld_rows = 4; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ld_rows (4) is smaller"}},
        C{"ld_cols < m", [](CtArgs &a) { a.ld_cols = 3; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ld_cols (3) is smaller"}},
        C{"x_dtype int8", [](CtArgs &a) { a.dtype = SCHEDX_INT8; }, {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 3"}},
        C{"x_dtype not an enumerator", [](CtArgs &a) { a.dtype = schedx_dtype(99); },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 99"}},
        C{"format", [](CtArgs &a) { a.format = schedx_fp8_format(2); }, {SCHEDX_ERR_UNSUPPORTED_FORMAT, "format 2"}},
        C{"format negative", [](CtArgs &a) { a.format = schedx_fp8_format(-1); },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "format -1"}},
        C{"device", [](CtArgs &a) { a.device = schedx_device(2); }, {SCHEDX_ERR_BAD_DEVICE, "device 2"}},
        C{"rows over cols", [](CtArgs &a) { a.cols = a.rows + 8; }, {SCHEDX_ERR_OVERLAP, "output rows overlaps cols"}},
        C{"rows over x", [](CtArgs &a) { a.rows = const_cast<uint8_t *>(static_cast<const uint8_t *>(a.x)) + 6; },
          {SCHEDX_ERR_OVERLAP, "output rows overlaps x"}},
        C{"cols over x", [](CtArgs &a) { a.cols = const_cast<uint8_t *>(static_cast<const uint8_t *>(a.x)); },
          {SCHEDX_ERR_OVERLAP, "output cols overlaps x"}},
        C{"amax over scale", [](CtArgs &a) { a.amax = const_cast<float *>(a.scale); },
          {SCHEDX_ERR_OVERLAP, "output amax overlaps scale"}},
        C{"scale_inv over amax", [](CtArgs &a) { a.scale_inv = a.amax; },
          {SCHEDX_ERR_OVERLAP, "output amax overlaps scale_inv"}},
        C{"amax inside rows", [](CtArgs &a) { a.amax = reinterpret_cast<float *>(a.rows + 16); },
          {SCHEDX_ERR_OVERLAP, "output rows overlaps amax"}},
        C{"x at an odd address", [](CtArgs &a) { a.x = static_cast<const uint8_t *>(a.x) + 1; },
          {SCHEDX_ERR_MISALIGNED, "x is not aligned to its 2-byte elements"}},
        C{"amax 2 bytes past a float", [](CtArgs &a) { a.amax = reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(a.amax) + 2); },
          {SCHEDX_ERR_MISALIGNED, "amax is not aligned to its 4-byte elements"}},
        C{"x bytes past 2^64", [](CtArgs &a) { a.ldx = kOverflow; },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"x ends past the top of the address space",
          [](CtArgs &a) { a.x = reinterpret_cast<const void *>(UINTPTR_MAX - 32); },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"ld_cols past 2^31", [](CtArgs &a) { a.ld_cols = kHuge; },
          {SCHEDX_ERR_SIZE_OVERFLOW, "cols: a dimension or leading dimension exceeds"}},
        C{"x spans more than 2^31 elements",
          [&](CtArgs &a) {
              a.m = wide_m;
              a.ldx = kWideLd;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: 3 rows of leading dimension 1000000000"}},
    });
}

TEST_CASE("cast_transpose current scaling: the valid call writes amax, scale, scale_inv and both copies") {
    CurrentScalingArgs a;
    REQUIRE(a.call() == SCHEDX_OK);
    CHECK(*a.amax == 1.0f);
    CHECK(*a.scale == 448.0f);
    CHECK(*a.scale_inv == 1.0f / 448.0f);
    CHECK(a.rowsb.data()[31] == 0x7E);  // e4m3fn 448
    CHECK(a.colsb.data()[31] == 0x7E);
}

TEST_CASE("cast_transpose current scaling: each bad argument has its status and message, and nothing is written") {
    using C = Case<CurrentScalingArgs>;
    using A = CurrentScalingArgs;
    run_cases<A>({
        C{"amax NULL", [](A &a) { a.amax = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "amax, scale and scale_inv are required"}},
        C{"scale_inv NULL", [](A &a) { a.scale_inv = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "amax, scale and scale_inv are required"}},
        C{"scale NULL", [](A &a) { a.scale = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "scale is NULL"}},
        C{"empty x, amax NULL", [](A &a) { a.m = 0, a.amax = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "amax, scale and scale_inv are required"}},
        C{"x NULL", [](A &a) { a.x = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "x is NULL"}},
        C{"format", [](A &a) { a.format = schedx_fp8_format(2); }, {SCHEDX_ERR_UNSUPPORTED_FORMAT, "format 2"}},
        C{"scale over amax", [](A &a) { a.scale = a.amax; }, {SCHEDX_ERR_OVERLAP, "output scale overlaps amax"}},
        C{"scale over x", [](A &a) { a.scale = static_cast<const float *>(a.x); },
          {SCHEDX_ERR_OVERLAP, "output scale overlaps x"}},
        C{"scale inside rows", [](A &a) { a.scale = reinterpret_cast<const float *>(a.rows + 8); },
          {SCHEDX_ERR_OVERLAP, "output scale overlaps rows"}},
        C{"ld_rows < k", [](A &a) { a.ld_rows = 4; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ld_rows (4) is smaller"}},
    });
}

TEST_CASE("cast_transpose: CUDA without a device, or with host pointers, is refused; the CPU path still works") {
    check_cuda_refused_cpu_works<CtArgs>();
    check_cuda_refused_cpu_works<DivideArgs>();
}

TEST_CASE("cast_transpose divide: the valid call writes both copies of x / divisor and nothing else") {
    DivideArgs a;
    const float two = 2.0f;
    std::memcpy(a.scaleb.data(), &two, 4);
    REQUIRE(a.call() == SCHEDX_OK);
    CHECK(a.rowsb.data()[31] == 0x30);  // e4m3fn 0.5
    CHECK(a.colsb.data()[31] == 0x30);
    CHECK(a.amaxb.untouched());
    CHECK(a.scale_invb.untouched());
}

TEST_CASE("cast_transpose divide: each bad argument has its status and message, and nothing is written") {
    using C = Case<DivideArgs>;
    using A = DivideArgs;
    run_cases<A>({
        C{"divisor NULL", [](A &a) { a.scale = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "divisor is NULL"}},
        C{"empty x, divisor NULL", [](A &a) { a.k = 0, a.scale = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "divisor is NULL"}},
        C{"x NULL", [](A &a) { a.x = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "x is NULL"}},
        C{"rows and cols NULL", [](A &a) { a.rows = a.cols = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "rows and cols are both NULL"}},
        C{"m negative", [](A &a) { a.m = -1; }, {SCHEDX_ERR_BAD_SIZE, "m must not be negative, got -1"}},
        C{"x_dtype int8", [](A &a) { a.dtype = SCHEDX_INT8; }, {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 3"}},
        C{"format", [](A &a) { a.format = schedx_fp8_format(2); }, {SCHEDX_ERR_UNSUPPORTED_FORMAT, "format 2"}},
        C{"device", [](A &a) { a.device = schedx_device(2); }, {SCHEDX_ERR_BAD_DEVICE, "device 2"}},
        C{"ld_cols < m", [](A &a) { a.ld_cols = 3; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ld_cols (3) is smaller"}},
        C{"rows over the divisor", [](A &a) { a.rows = reinterpret_cast<uint8_t *>(const_cast<float *>(a.scale)); },
          {SCHEDX_ERR_OVERLAP, "output rows overlaps divisor"}},
        C{"divisor 2 bytes past a float",
          [](A &a) { a.scale = reinterpret_cast<const float *>(reinterpret_cast<const uint8_t *>(a.scale) + 2); },
          {SCHEDX_ERR_MISALIGNED, "divisor is not aligned to its 4-byte elements"}},
    });
}

TEST_CASE("cast_transpose: forced variants: unknown names, another device, another dtype") {
    CHECK(schedx_force_variant("cast_transpose", "cast_transpose_no_such") == SCHEDX_ERR_UNKNOWN_VARIANT);
    CHECK(std::string(schedx_last_error()).find("cast_transpose_no_such") != std::string::npos);
    CHECK(schedx_force_variant("no_such_op", nullptr) == SCHEDX_ERR_UNKNOWN_VARIANT);
    CHECK(std::string(schedx_last_error()).find("no_such_op") != std::string::npos);
    CHECK(schedx_force_variant(nullptr, "cast_transpose_bf16_cpu") == SCHEDX_ERR_NULL_POINTER);
    CHECK(std::string(schedx_last_error()) == "op is NULL");

    const std::string cuda = test::variants_of("cast_transpose", "cuda").at(0);
    for (const std::string &name : {cuda, std::string("cast_transpose_fp16_cpu")}) {
        CAPTURE(name);
        REQUIRE(schedx_force_variant("cast_transpose", name.c_str()) == SCHEDX_OK);
        CtArgs a;
        const Snapshot snap = a.snapshot();
        check_failure(a.call(), {SCHEDX_ERR_VARIANT_CANNOT_RUN, "forced variant " + name}, snap);
    }
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    CtArgs a;
    CHECK(a.call() == SCHEDX_OK);
}

TEST_CASE("w8_linear: the valid call these cases start from succeeds and writes every output") {
    W8Args a;
    REQUIRE(a.call() == SCHEDX_OK);
    CHECK(std::string(schedx_last_error()) == "");
    uint16_t y_last;
    std::memcpy(&y_last, a.yb.data() + 14, 2);
    CHECK(y_last == 0x4100);  // bf16 8.0: eight products of 1 * 1
}

TEST_CASE("w8_linear: each bad argument has its status and message, and nothing is written") {
    using C = Case<W8Args>;
    auto bytes = [](const void *p) { return const_cast<uint8_t *>(static_cast<const uint8_t *>(p)); };
    run_cases<W8Args>({
        C{"x NULL", [](W8Args &a) { a.x = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "x is NULL"}},
        C{"w NULL", [](W8Args &a) { a.w = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "w is NULL"}},
        C{"scales NULL", [](W8Args &a) { a.scales = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "scales is NULL"}},
        C{"y NULL", [](W8Args &a) { a.y = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "y is NULL"}},
        C{"m negative", [](W8Args &a) { a.m = -2; }, {SCHEDX_ERR_BAD_SIZE, "m must not be negative, got -2"}},
        C{"k negative", [](W8Args &a) { a.k = -1; }, {SCHEDX_ERR_BAD_SIZE, "k must not be negative, got -1"}},
        C{"n negative", [](W8Args &a) { a.n = INT64_MIN; }, {SCHEDX_ERR_BAD_SIZE, "n must not be negative"}},
        C{"k zero, scales NULL", [](W8Args &a) { a.k = 0, a.scales = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "scales is NULL"}},
        C{"k zero, y NULL", [](W8Args &a) { a.k = 0, a.y = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "y is NULL"}},
        C{"m zero, w NULL", [](W8Args &a) { a.m = 0, a.w = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "w is NULL"}},
        C{"m zero, ldy < n", [](W8Args &a) { a.m = 0, a.ldy = 3; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldy (3) is smaller"}},
        C{"k zero, x_dtype fp32", [](W8Args &a) { a.k = 0, a.x_dtype = SCHEDX_FP32; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 2"}},
        C{"ldx < k", [](W8Args &a) { a.ldx = 7; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldx (7) is smaller than k (8)"}},
        C{"ldw < k", [](W8Args &a) { a.ldw = 0; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldw (0) is smaller than k (8)"}},
        C{"ldy < n", [](W8Args &a) { a.ldy = 3; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldy (3) is smaller than n (4)"}},
        C{"x_dtype fp32", [](W8Args &a) { a.x_dtype = SCHEDX_FP32; }, {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 2"}},
        C{"x_dtype not an enumerator", [](W8Args &a) { a.x_dtype = schedx_dtype(-5); },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype -5"}},
        C{"scales_dtype fp16", [](W8Args &a) { a.scales_dtype = SCHEDX_FP16; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "scales_dtype 1"}},
        C{"scales_dtype int8", [](W8Args &a) { a.scales_dtype = SCHEDX_INT8; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "scales_dtype 3"}},
        C{"device", [](W8Args &a) { a.device = schedx_device(-1); }, {SCHEDX_ERR_BAD_DEVICE, "device -1"}},
        C{"y over x", [&](W8Args &a) { a.y = bytes(a.x) + 4; }, {SCHEDX_ERR_OVERLAP, "output y overlaps x"}},
        C{"y over w", [&](W8Args &a) { a.y = bytes(a.w) + 30; }, {SCHEDX_ERR_OVERLAP, "output y overlaps w"}},
        C{"y over scales", [&](W8Args &a) { a.y = bytes(a.scales); }, {SCHEDX_ERR_OVERLAP, "output y overlaps scales"}},
        C{"y over bias", [&](W8Args &a) { a.bias = bytes(a.y) + 8; }, {SCHEDX_ERR_OVERLAP, "output y overlaps bias"}},
        C{"x at an odd address", [&](W8Args &a) { a.x = bytes(a.x) + 1; },
          {SCHEDX_ERR_MISALIGNED, "x is not aligned to its 2-byte elements"}},
        C{"y at an odd address", [&](W8Args &a) { a.y = bytes(a.y) + 1; },
          {SCHEDX_ERR_MISALIGNED, "y is not aligned to its 2-byte elements"}},
        C{"x bytes past 2^64",
          [](W8Args &a) {
              a.m = 4;
              a.ldx = kOverflow;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"w ends past the top of the address space",
          [](W8Args &a) { a.w = reinterpret_cast<const int8_t *>(UINTPTR_MAX - 16); },
          {SCHEDX_ERR_SIZE_OVERFLOW, "w: byte count overflows 64 bits"}},
        C{"ldw past 2^31", [](W8Args &a) { a.ldw = kHuge; },
          {SCHEDX_ERR_SIZE_OVERFLOW, "w: a dimension or leading dimension exceeds"}},
        C{"y spans more than 2^31 elements",
          [](W8Args &a) {
              a.m = 3;
              a.ldy = kWideLd;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "y: 3 rows of leading dimension 1000000000"}},
    });
}

TEST_CASE("w8_linear: CUDA without a device, or with host pointers, is refused; the CPU path still works") {
    check_cuda_refused_cpu_works<W8Args>();
}

TEST_CASE("w8_linear: forced variants: unknown names, another op's, another device, another dtype") {
    CHECK(schedx_force_variant("w8_linear", "w8_linear_no_such") == SCHEDX_ERR_UNKNOWN_VARIANT);
    CHECK(std::string(schedx_last_error()).find("w8_linear_no_such") != std::string::npos);
    CHECK(schedx_force_variant("w8_linear", "cast_transpose_bf16_cpu") == SCHEDX_ERR_UNKNOWN_VARIANT);
    CHECK(std::string(schedx_last_error()).find("cast_transpose_bf16_cpu") != std::string::npos);

    const std::string cuda = test::variants_of("w8_linear", "cuda").at(0);
    for (const std::string &name : {cuda, std::string("w8_linear_fp16_sbf16_cpu")}) {
        CAPTURE(name);
        REQUIRE(schedx_force_variant("w8_linear", name.c_str()) == SCHEDX_OK);
        W8Args a;
        const Snapshot snap = a.snapshot();
        check_failure(a.call(), {SCHEDX_ERR_VARIANT_CANNOT_RUN, "forced variant " + name}, snap);
    }
    REQUIRE(schedx_force_variant("w8_linear", nullptr) == SCHEDX_OK);
}

TEST_CASE("abs_max: the valid call these cases start from succeeds and writes amax") {
    AbsMaxArgs a;
    REQUIRE(a.call() == SCHEDX_OK);
    CHECK(std::string(schedx_last_error()) == "");
    CHECK(*a.amax == 1.0f);
}

TEST_CASE("abs_max: each bad argument has its status and message, and nothing is written") {
    using C = Case<AbsMaxArgs>;
    using A = AbsMaxArgs;
    auto bytes = [](const void *p) { return const_cast<uint8_t *>(static_cast<const uint8_t *>(p)); };
    run_cases<A>({
        C{"x NULL", [](A &a) { a.x = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "x is NULL"}},
        C{"amax NULL", [](A &a) { a.amax = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "amax is NULL"}},
        C{"empty x, amax NULL", [](A &a) { a.m = 0, a.amax = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "amax is NULL"}},
        C{"m negative", [](A &a) { a.m = -1; }, {SCHEDX_ERR_BAD_SIZE, "m must not be negative, got -1"}},
        C{"k negative", [](A &a) { a.k = -3; }, {SCHEDX_ERR_BAD_SIZE, "k must not be negative, got -3"}},
        C{"m most negative", [](A &a) { a.m = INT64_MIN; }, {SCHEDX_ERR_BAD_SIZE, "m must not be negative, got -9223372036854775808"}},
        C{"ldx < k", [](A &a) { a.ldx = 7; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldx (7) is smaller than k (8)"}},
        C{"ldx negative", [](A &a) { a.ldx = -8; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldx (-8) is smaller than k (8)"}},
        C{"x_dtype int8", [](A &a) { a.dtype = SCHEDX_INT8; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 3 is not bf16, fp16 or fp32"}},
        C{"x_dtype not an enumerator", [](A &a) { a.dtype = schedx_dtype(99); },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 99 is not bf16, fp16 or fp32"}},
        // The dtype is checked before the empty-x shortcut writes amax.
        C{"empty x, x_dtype int8", [](A &a) { a.k = 0, a.dtype = SCHEDX_INT8; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 3"}},
        C{"device", [](A &a) { a.device = schedx_device(2); }, {SCHEDX_ERR_BAD_DEVICE, "device 2 is not a schedx_device"}},
        C{"device negative", [](A &a) { a.device = schedx_device(-1); }, {SCHEDX_ERR_BAD_DEVICE, "device -1"}},
        C{"amax over x", [&](A &a) { a.amax = reinterpret_cast<float *>(bytes(a.x)); },
          {SCHEDX_ERR_OVERLAP, "output amax overlaps x"}},
        C{"amax inside x", [&](A &a) { a.amax = reinterpret_cast<float *>(bytes(a.x) + 8); },
          {SCHEDX_ERR_OVERLAP, "output amax overlaps x"}},
        C{"x at an odd address", [&](A &a) { a.x = bytes(a.x) + 1; },
          {SCHEDX_ERR_MISALIGNED, "x is not aligned to its 2-byte elements"}},
        C{"fp32 x 2 bytes past a float",
          [&](A &a) {
              a.dtype = SCHEDX_FP32;
              a.m = 2;
              a.x = bytes(a.x) + 2;
          },
          {SCHEDX_ERR_MISALIGNED, "x is not aligned to its 4-byte elements"}},
        C{"amax 2 bytes past a float", [&](A &a) { a.amax = reinterpret_cast<float *>(bytes(a.amax) + 2); },
          {SCHEDX_ERR_MISALIGNED, "amax is not aligned to its 4-byte elements"}},
        // The empty-x path still checks amax before writing its 0.
        C{"empty x, amax 2 bytes past a float",
          [&](A &a) { a.m = 0, a.amax = reinterpret_cast<float *>(bytes(a.amax) + 2); },
          {SCHEDX_ERR_MISALIGNED, "amax is not aligned to its 4-byte elements"}},
        C{"x bytes past 2^64", [](A &a) { a.ldx = kOverflow; }, {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"m * k bytes past 2^64",
          [](A &a) {
              a.m = kOverflow;
              a.k = a.ldx = 8;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"x ends past the top of the address space", [](A &a) { a.x = reinterpret_cast<const void *>(UINTPTR_MAX - 32); },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"ldx past 2^31", [](A &a) { a.ldx = kHuge; },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: a dimension or leading dimension exceeds"}},
        C{"x spans more than 2^31 elements",
          [](A &a) {
              a.m = 3;
              a.ldx = kWideLd;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: 3 rows of leading dimension 1000000000"}},
    });
}

TEST_CASE("abs_max: CUDA without a device, or with host pointers, is refused; the CPU path still works") {
    check_cuda_refused_cpu_works<AbsMaxArgs>();
}

TEST_CASE("quantize_fp8: the valid call these cases start from succeeds and writes every output") {
    // The scale buffers' sizes in QuantizeArgs are the shapes the library reports.
    int64_t n_rows = -1, n_cols = -1;
    REQUIRE(schedx_quantize_fp8_scale_shape(SCHEDX_RECIPE_BLOCK_1X128, 4, 8, 0, &n_rows, &n_cols) == SCHEDX_OK);
    CHECK(n_rows * n_cols * 4 == 1 * 4 * 4);
    REQUIRE(schedx_quantize_fp8_scale_shape(SCHEDX_RECIPE_BLOCK_1X128, 4, 8, 1, &n_rows, &n_cols) == SCHEDX_OK);
    CHECK(n_rows * n_cols * 4 == 1 * 8 * 4);
    QuantizeArgs a;
    REQUIRE(a.call() == SCHEDX_OK);
    CHECK(std::string(schedx_last_error()) == "");
    CHECK(a.rowsb.data()[31] == 0x7E);  // e4m3fn 448: amax 1, scale 448
    CHECK(a.colsb.data()[31] == 0x7E);
    CHECK(a.rows_scaleb.as<float>()[3] == 1.0f / 448.0f);
    CHECK(a.cols_scaleb.as<float>()[7] == 1.0f / 448.0f);
}

TEST_CASE("quantize_fp8: each bad argument has its status and message, and nothing is written") {
    using C = Case<QuantizeArgs>;
    using A = QuantizeArgs;
    auto bytes = [](const void *p) { return const_cast<uint8_t *>(static_cast<const uint8_t *>(p)); };
    run_cases<A>({
        C{"device", [](A &a) { a.device = schedx_device(2); }, {SCHEDX_ERR_BAD_DEVICE, "device 2 is not a schedx_device"}},
        C{"options NULL", [](A &a) { a.options = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "options is NULL"}},
        C{"recipe", [](A &a) { a.opt.recipe = schedx_fp8_recipe(7); },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->recipe 7 is not a schedx_fp8_recipe"}},
        C{"recipe negative", [](A &a) { a.opt.recipe = schedx_fp8_recipe(-1); },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->recipe -1 is not a schedx_fp8_recipe"}},
        C{"format", [](A &a) { a.opt.format = schedx_fp8_format(2); },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->format 2 is not e4m3fn or e5m2"}},
        C{"mx_mode",
          [](A &a) {
              a.opt.recipe = SCHEDX_RECIPE_MXFP8;
              a.opt.mx_mode = schedx_mx_scale_mode(2);
          },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->mx_mode 2 is not SCHEDX_MX_FLOOR or SCHEDX_MX_RCEIL"}},
        C{"pow2_scales 2", [](A &a) { a.opt.pow2_scales = 2; },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->pow2_scales must be 0 or 1, got 2"}},
        C{"pow2_scales negative", [](A &a) { a.opt.pow2_scales = -1; },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->pow2_scales must be 0 or 1, got -1"}},
        // The axiswise recipe does not use epsilon but still validates it.
        C{"axiswise pow2_scales 2",
          [](A &a) {
              a.opt.recipe = SCHEDX_RECIPE_AXISWISE;
              a.opt.pow2_scales = 2;
          },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->pow2_scales must be 0 or 1, got 2"}},
        C{"epsilon NaN", [](A &a) { a.opt.epsilon = NAN; },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->epsilon must be finite and >= +0, got "}},
        C{"epsilon inf", [](A &a) { a.opt.epsilon = INFINITY; },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->epsilon must be finite and >= +0, got inf"}},
        C{"epsilon negative", [](A &a) { a.opt.epsilon = -1.0f; },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->epsilon must be finite and >= +0, got -1.000000"}},
        C{"epsilon -0", [](A &a) { a.opt.epsilon = -0.0f; },
          {SCHEDX_ERR_UNSUPPORTED_FORMAT, "options->epsilon must be finite and >= +0, got -0.000000"}},
        C{"m negative", [](A &a) { a.m = -1; }, {SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0, got -1 and 8"}},
        C{"k negative", [](A &a) { a.k = -3; }, {SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0, got 4 and -3"}},
        C{"m most negative", [](A &a) { a.m = INT64_MIN; },
          {SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0, got -9223372036854775808 and 8"}},
        C{"x_dtype int8", [](A &a) { a.dtype = SCHEDX_INT8; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 3 is not bf16, fp16 or fp32"}},
        C{"x_dtype not an enumerator", [](A &a) { a.dtype = schedx_dtype(99); },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 99 is not bf16, fp16 or fp32"}},
        C{"empty x, x_dtype int8", [](A &a) { a.m = 0, a.dtype = SCHEDX_INT8; },
          {SCHEDX_ERR_UNSUPPORTED_DTYPE, "x_dtype 3"}},
        // Axiswise with K = 0 still writes rows_scale [M][1]: that array is checked first.
        C{"empty axiswise x, rows_scale 2 bytes past a float",
          [&](A &a) {
              a.opt.recipe = SCHEDX_RECIPE_AXISWISE;
              a.k = 0;
              a.rows_scale = bytes(a.rows_scale) + 2;
          },
          {SCHEDX_ERR_MISALIGNED, "rows_scale is not aligned to its 4-byte elements"}},
        C{"rows and cols NULL", [](A &a) { a.rows = a.cols = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "rows and cols are both NULL: nothing to write"}},
        C{"rows without rows_scale", [](A &a) { a.rows_scale = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "rows is given without rows_scale"}},
        C{"cols without cols_scale", [](A &a) { a.cols_scale = nullptr; },
          {SCHEDX_ERR_NULL_POINTER, "cols is given without cols_scale"}},
        C{"x NULL", [](A &a) { a.x = nullptr; }, {SCHEDX_ERR_NULL_POINTER, "x is NULL"}},
        C{"ldx < k", [](A &a) { a.ldx = 7; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ldx (7) is smaller than k (8)"}},
        C{"ld_rows < k", [](A &a) { a.ld_rows = 4; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ld_rows (4) is smaller than k (8)"}},
        C{"ld_cols < m", [](A &a) { a.ld_cols = 3; }, {SCHEDX_ERR_BAD_LEADING_DIM, "ld_cols (3) is smaller than m (4)"}},
        C{"x at an odd address", [&](A &a) { a.x = bytes(a.x) + 1; },
          {SCHEDX_ERR_MISALIGNED, "x is not aligned to its 2-byte elements"}},
        C{"fp32 x 2 bytes past a float",
          [&](A &a) {
              a.dtype = SCHEDX_FP32;
              a.m = 2;
              a.x = bytes(a.x) + 2;
          },
          {SCHEDX_ERR_MISALIGNED, "x is not aligned to its 4-byte elements"}},
        C{"rows_scale 2 bytes past a float", [&](A &a) { a.rows_scale = bytes(a.rows_scale) + 2; },
          {SCHEDX_ERR_MISALIGNED, "rows_scale is not aligned to its 4-byte elements"}},
        C{"cols_scale 2 bytes past a float", [&](A &a) { a.cols_scale = bytes(a.cols_scale) + 2; },
          {SCHEDX_ERR_MISALIGNED, "cols_scale is not aligned to its 4-byte elements"}},
        C{"rows over x", [&](A &a) { a.rows = bytes(a.x) + 6; }, {SCHEDX_ERR_OVERLAP, "output rows overlaps x"}},
        C{"cols over x", [&](A &a) { a.cols = bytes(a.x); }, {SCHEDX_ERR_OVERLAP, "output cols overlaps x"}},
        C{"rows_scale over x", [&](A &a) { a.rows_scale = bytes(a.x) + 16; },
          {SCHEDX_ERR_OVERLAP, "output rows_scale overlaps x"}},
        C{"rows over cols", [](A &a) { a.cols = a.rows + 8; }, {SCHEDX_ERR_OVERLAP, "output rows overlaps cols"}},
        C{"cols_scale over rows", [](A &a) { a.cols_scale = a.rows; },
          {SCHEDX_ERR_OVERLAP, "output rows overlaps cols_scale"}},
        C{"rows_scale over cols_scale", [&](A &a) { a.rows_scale = bytes(a.cols_scale) + 4; },
          {SCHEDX_ERR_OVERLAP, "output rows_scale overlaps cols_scale"}},
        C{"cols_scale inside cols", [](A &a) { a.cols_scale = a.cols + 16; },
          {SCHEDX_ERR_OVERLAP, "output cols overlaps cols_scale"}},
        C{"x bytes past 2^64", [](A &a) { a.ldx = kOverflow; }, {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        // cols NULL, so that ld_cols need not reach m.
        C{"m * k bytes past 2^64",
          [](A &a) {
              a.m = kOverflow;
              a.cols = nullptr;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"x ends past the top of the address space", [](A &a) { a.x = reinterpret_cast<const void *>(UINTPTR_MAX - 32); },
          {SCHEDX_ERR_SIZE_OVERFLOW, "x: byte count overflows 64 bits"}},
        C{"ld_cols past 2^31", [](A &a) { a.ld_cols = kHuge; },
          {SCHEDX_ERR_SIZE_OVERFLOW, "cols: a dimension or leading dimension exceeds"}},
        C{"rows spans more than 2^31 elements",
          [](A &a) {
              a.m = 3;
              a.ld_rows = kWideLd;
          },
          {SCHEDX_ERR_SIZE_OVERFLOW, "rows: 3 rows of leading dimension 1000000000"}},
    });
}

TEST_CASE("quantize_fp8: CUDA without a device, or with host pointers, is refused; the CPU path still works") {
    check_cuda_refused_cpu_works<QuantizeArgs>();
}

TEST_CASE("quantize_fp8_scale_shape: NULL out-pointers, an unknown recipe, negative sizes; nothing is written") {
    int64_t n_rows = -7, n_cols = -7;
    REQUIRE(schedx_quantize_fp8_scale_shape(SCHEDX_RECIPE_BLOCK_1X128, 4, 8, 0, &n_rows, &n_cols) == SCHEDX_OK);
    CHECK(n_rows == 1);
    CHECK(n_cols == 4);
    struct ShapeCase {
        const char *what;
        schedx_fp8_recipe recipe;
        int64_t m, k;
        bool rows_out, cols_out;
        Expect expect;
    };
    const ShapeCase cases[] = {
        {"n_rows NULL", SCHEDX_RECIPE_BLOCK_1X128, 4, 8, false, true, {SCHEDX_ERR_NULL_POINTER, "n_rows is NULL"}},
        {"n_cols NULL", SCHEDX_RECIPE_BLOCK_1X128, 4, 8, true, false, {SCHEDX_ERR_NULL_POINTER, "n_cols is NULL"}},
        {"recipe", schedx_fp8_recipe(7), 4, 8, true, true,
         {SCHEDX_ERR_UNSUPPORTED_FORMAT, "recipe 7 is not a schedx_fp8_recipe"}},
        {"recipe negative", schedx_fp8_recipe(-1), 4, 8, true, true,
         {SCHEDX_ERR_UNSUPPORTED_FORMAT, "recipe -1 is not a schedx_fp8_recipe"}},
        {"m negative", SCHEDX_RECIPE_BLOCK_1X128, -1, 8, true, true, {SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0"}},
        {"k negative", SCHEDX_RECIPE_MXFP8, 4, INT64_MIN, true, true, {SCHEDX_ERR_BAD_SIZE, "m and k must be >= 0"}},
    };
    for (const ShapeCase &c : cases) {
        const std::string what = c.what;
        CAPTURE(what);
        n_rows = n_cols = -7;
        const schedx_status got = schedx_quantize_fp8_scale_shape(c.recipe, c.m, c.k, 0, c.rows_out ? &n_rows : nullptr,
                                                                  c.cols_out ? &n_cols : nullptr);
        CHECK(got == c.expect.status);
        const std::string msg = schedx_last_error();
        CAPTURE(msg);
        CHECK(msg.find(c.expect.message) != std::string::npos);
        CHECK(n_rows == -7);
        CHECK(n_cols == -7);
    }
}

TEST_CASE("registry lookups: a NULL out-pointer and out-of-range indices") {
    CHECK(schedx_get_variant(0, nullptr) == SCHEDX_ERR_NULL_POINTER);
    CHECK(std::string(schedx_last_error()) == "info is NULL");
    schedx_variant_info info;
    for (int index : {-1, schedx_variant_count()}) {
        CHECK(schedx_get_variant(index, &info) == SCHEDX_ERR_UNKNOWN_VARIANT);
        CHECK(std::string(schedx_last_error()).find("variant index " + std::to_string(index)) == 0);
    }
    CHECK(schedx_last_variant(nullptr) == nullptr);
    CHECK(schedx_last_variant("no_such_op") == nullptr);
}

TEST_CASE("a pipeline whose buffer argument was never bound refuses to run") {
    // Halide reads a null buffer as a bounds query and returns success having computed
    // nothing; PipelineCall must refuse instead (a misspelt argument name once did this).
    const schedx::Variant *v = schedx::find_variant("cast_transpose_bf16_cpu");
    REQUIRE(v != nullptr);
    std::vector<uint16_t> x(16 * 16, 0x3F80);
    std::vector<uint8_t> rows(16 * 16, 0xA5), cols(16 * 16, 0xA5);
    const float scale = 1.0f;
    schedx::PipelineCall call(*v, nullptr);
    call.bind_matrix("input", x.data(), 16, 16, 16, 2);
    call.bind_scalar_buffer("scale", &scale);
    call.bind_int("fp8_format", 0);
    call.bind_matrix("rows", rows.data(), 16, 16, 16, 1);  // "cols" left unbound
    CHECK(call.run() == SCHEDX_ERR_NULL_POINTER);
    CHECK(std::string(schedx_last_error()).find("argument cols not bound") != std::string::npos);
    CHECK(rows[0] == 0xA5);
}

TEST_CASE("variants.json's jit_max_registers reaches the registry as each CUDA variant's register cap") {
    const schedx::Variant *wide = schedx::find_variant("w8_linear_bf16_sbf16_b8_r4w2");
    const schedx::Variant *narrow = schedx::find_variant("w8_linear_bf16_sbf16_gemv_r2w16_coalesced");
    REQUIRE(wide != nullptr);
    REQUIRE(narrow != nullptr);
    CHECK(wide->jit_max_registers == 128);
    CHECK(narrow->jit_max_registers == 0);  // Halide's default cap
    for (const schedx::Variant &v : schedx::registry()) {
        CAPTURE(v.name);
        // The JIT takes 1..255; a cap on a CPU variant would mean nothing.
        CHECK(v.jit_max_registers >= 0);
        CHECK(v.jit_max_registers <= 255);
        if (v.device == schedx::Device::cpu) CHECK(v.jit_max_registers == 0);
    }
}

TEST_CASE("variants.json's kernels_of: an entry calls an earlier entry's pipeline and has its parameters") {
    const std::vector<std::string> settings{"jit_max_registers", "cublaslt_config", "cublaslt_heuristic_rank",
                                            "kernels_of"};
    auto generator_params = [&](const schedx::Variant &v) {
        auto p = v.params;
        for (const std::string &s : settings) p.erase(s);
        for (auto it = p.begin(); it != p.end();) it = it->first.rfind("untuned_", 0) == 0 ? p.erase(it) : std::next(it);
        return p;
    };
    int sharing = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        const std::string_view of = v.param("kernels_of");
        if (of.empty()) continue;
        CAPTURE(v.name);
        const schedx::Variant *owner = schedx::find_variant(std::string(of));
        REQUIRE(owner != nullptr);
        CHECK(owner->param("kernels_of").empty());  // one level: the owner generated its own
        CHECK((owner->argv == v.argv));  // parenthesised: doctest cannot print these
        CHECK((owner->metadata == v.metadata));
        CHECK((generator_params(*owner) == generator_params(v)));
        // One CUDA module per pipeline, loaded under one register cap.
        CHECK(owner->jit_max_registers == v.jit_max_registers);
        CHECK(owner->op == v.op);
        CHECK(owner->device == v.device);
        sharing++;
    }
    // The ranked cuBLASLt rescale variants (5 ranks x 4 dtype pairs) and the two GemmEx planes variants.
    CHECK(sharing >= 22);
    const schedx::Variant *ranked = schedx::find_variant("w8_linear_bf16_sbf16_dequant_cublaslt_h2_rescale");
    REQUIRE(ranked != nullptr);
    CHECK(ranked->param_int("cublaslt_heuristic_rank", -1) == 2);
}

TEST_CASE("hand-scheduled CUDA variants allocate no device memory inside their pipelines, nor local memory in their kernels") {
    // An intermediate Func that a schedule leaves in global memory becomes a
    // halide_device_malloc on every call (a rows-per-thread split below a compute_at did
    // it to the dequantize once): that breaks "nothing is allocated per call", and a
    // cuMemAlloc cannot run in a CUDA graph capture. Read from each pipeline's lowered
    // statement (the .stmt add_halide_library writes). Autoscheduled variants, kept for
    // comparison only, do allocate their intermediates (README, Runtime behaviour).
    int checked = 0, autoscheduled_allocating = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda) continue;
        CAPTURE(v.name);
        const std::string text = test::stmt_text(v);
        REQUIRE(!text.empty());
        const bool allocates = text.find("halide_device_malloc") != std::string::npos;
        if (!v.param("autoscheduler").empty()) {
            autoscheduled_allocating += allocates;
            continue;
        }
        CHECK_FALSE(allocates);
        // A per-thread local-memory frame in the PTX: a register array LLVM could not keep
        // in registers (the cast's load_words 8 variants had one, 1.4-1.9x slower).
        CHECK(text.find("__local_depot") == std::string::npos);
        checked++;
    }
    CHECK(checked >= 100);
    // The scan finds the calls where they are: some autoscheduled pipelines have them.
    CHECK(autoscheduled_allocating > 0);
}

TEST_CASE("element-I/O cast kernels: one launch for both outputs, element-wide global loads, byte stores") {
    // Their rows may start at any element (odd K, ragged M in ld_cols): a global access wider
    // than an element (a vector LLVM merged, say) would fault there. rows and cols share the
    // fp8 tile, so they must stay one kernel.
    const std::regex global(R"((ld|st)\.global(\.nc)?\.(v\d\.)?([a-z]\d+))");
    int checked = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda || v.param("io") != "element") continue;
        CAPTURE(v.name);
        const std::string text = test::stmt_text(v);
        REQUIRE(!text.empty());
        const size_t ptx = text.find("// Generated by LLVM NVPTX");
        REQUIRE(ptx != std::string::npos);
        size_t launches = 0;  // the host code follows the PTX; the general variant has two
        for (size_t at = text.find("halide_cuda_run("); at != std::string::npos; at = text.find("halide_cuda_run(", at + 1)) {
            launches++;
        }
        CHECK(launches == 1);
        const std::string code = text.substr(ptx);
        const bool half = v.param("in_type") != "fp32", fused_amax = v.param("with_amax") == "true";
        int b16_loads = 0, b32_loads = 0, stores = 0, word_stores = 0;
        for (auto it = std::sregex_iterator(code.begin(), code.end(), global); it != std::sregex_iterator(); ++it) {
            const std::smatch &m = *it;
            CAPTURE(m.str());
            CHECK(m[3].str().empty());
            if (m[1] == "st") {
                // The fused amax's tile-sink word is the one wider store.
                CHECK((m[4] == "b8" || (fused_amax && m[4] == "b32")));
                (m[4] == "b8" ? stores : word_stores)++;
            } else {
                CHECK((m[4] == "b32" || (half && m[4] == "b16")));
                (m[4] == "b16" ? b16_loads : b32_loads)++;
            }
        }
        // Beside x's loads, one 4-byte load: the scale (the fused amax reads it once more, for
        // scale_inv).
        const int scale_loads = fused_amax ? 2 : 1;
        CHECK((half ? b16_loads : b32_loads - scale_loads) > 0);
        if (half) CHECK(b32_loads == scale_loads);
        CHECK(stores > 0);
        CHECK(word_stores == (fused_amax ? 1 : 0));
        checked++;
    }
    CHECK(checked >= 6);
}

TEST_CASE("fused-amax cast kernels reduce warps by REDUX and issue the tile atomic without waiting on it") {
    // Each tile adds its maximum to the caller's amax by an atomic whose result
    // must be dead (ptxas then issues a RED no thread waits on); a result that is read
    // again, as when Halide hoisted the zero it is masked with to the host, holds every
    // block for a round trip to L2 (1.10-1.25x the cast instead of 1.04x at 8192^2).
    const std::regex atom(R"(atom\.sys\.max\.s32\s+(%r\d+),)");
    int checked = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda || v.param("schedule") != "cuda_tiled" || v.param("with_amax") != "true") {
            continue;
        }
        CAPTURE(v.name);
        const std::string text = test::stmt_text(v);
        REQUIRE(!text.empty());
        const size_t ptx = text.find("// Generated by LLVM NVPTX");
        REQUIRE(ptx != std::string::npos);
        const std::string code = text.substr(ptx);
        std::smatch found;
        REQUIRE(std::regex_search(code, found, atom));
        CHECK_FALSE(std::regex_search(found.suffix().str(), atom));  // one per tile, in one place
        // The destination register appears once: where the atomic writes it.
        const std::regex uses(found[1].str() + "(?![0-9])");
        const auto n = std::distance(std::sregex_iterator(code.begin(), code.end(), uses), std::sregex_iterator());
        CHECK(n == 1);
        // The tile's warps meet by REDUX, not by Halide's lane-by-lane shuffles and a
        // one-thread fold (1.045-1.054x the cast against 1.03-1.04x at the large shapes).
        CHECK(code.find("redux.sync.max.u32") != std::string::npos);
        CHECK(code.find("shfl.sync") == std::string::npos);
        checked++;
    }
    CHECK(checked >= 5);
}
