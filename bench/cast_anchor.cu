// schedx-cast-anchor: issue 2's ceiling question. Hand-written CUDA fp8 cast + transpose
// kernels for sm_90, using what Halide 21 cannot emit (its highest target is
// cuda_capability_86): the hardware conversion cvt.rn.satfinite.e4m3x2.f32, 255 registers,
// a persistent grid with the next tile's loads in flight while the current one is stored;
// and "_soft" twins that encode in integer arithmetic as schedx's kernels must, which tell
// what the hardware conversion alone is worth, with and without a fused amax.
// They are timed in one process with a cudaMemcpy of the same bytes and schedx's own
// variants (forced by name through the C ABI), by schedx-explore's timing code, back to
// back and after a dirty L2 (do_bench's condition), and checked bit for bit against
// schedx's output. If no hand kernel gets closer to the copy than schedx does, what is left
// of issue 2's targets is not a Halide or schedule limit.
// Usage: schedx-cast-anchor [--dirty-cache] [--shapes MxK,...]
#include <CLI/CLI.hpp>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_bench.h"
#include "measure.h"
#include "schedx/schedx.h"

namespace {

struct Args {
    const uint4 *x;  // bf16 [m][k], k a multiple of the tile
    const float *scale;
    uint8_t *rows, *cols;
    unsigned *amax;  // float bits, zeroed on the stream before the kernel; nullptr: none
    float *scale_inv;
    int m, k;
};

// e4m3fn in integer arithmetic, the algorithm schedx's Halide kernels run (Halide 21 cannot
// emit the hardware conversion): the "_soft" kernels time the same integer work. Clamp the
// magnitude, round off 20 mantissa bits to even and rebias; below the smallest normal, one
// float add of 2^14 rounds to the subnormal unit.
__device__ __forceinline__ unsigned encode_e4m3_soft(float p) {
    const unsigned u = __float_as_uint(p), sign = (u >> 24) & 0x80u;
    const unsigned a = min(u & 0x7FFFFFFFu, 0x43E00000u);
    const unsigned normal = (a + (unsigned(7 - 127) << 23) + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
    const unsigned sub = __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(141u << 23))) - (141u << 23);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7Fu : ((a < (121u << 23) ? sub : normal) | sign);
}

// Eight bf16 (one 16-byte load) scaled and encoded: eight e4m3fn bytes, lowest address first.
template <bool SOFT>
__device__ __forceinline__ uint2 encode8(uint4 v, float s) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    unsigned p[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float lo = __uint_as_float(w[i] << 16) * s, hi = __uint_as_float(w[i] & 0xFFFF0000u) * s;
        p[i] = SOFT ? encode_e4m3_soft(lo) | encode_e4m3_soft(hi) << 8
                    : __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
    }
    return make_uint2(p[0] | p[1] << 16, p[2] | p[3] << 16);
}

// max |x| of eight bf16 as their bits with the sign cleared (they order like |x|).
__device__ __forceinline__ unsigned abs_max8(uint4 v) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    unsigned mx = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) mx = max(mx, max(w[i] & 0x7FFFu, (w[i] >> 16) & 0x7FFFu));
    return mx;
}

// One TM x TK tile: thread (tx, ty) loads rows ty + r * TY, r < R, 16 bytes each, writes
// their fp8 rows straight from registers and into shared memory; then each thread takes
// 4 columns x 16 rows of the fp8 tile and writes 4 transposed rows of 16 bytes.
template <int TM, int TK, int R, bool SOFT = false>
struct Tile {
    static constexpr int TX = TK / 8, TY = TM / R, NT = TX * TY;
    static constexpr int SROW = TK + 4;  // bytes; 17 words for TK = 64: no bank conflicts in the column reads
    static constexpr int ITEMS = (TK / 4) * (TM / 16);

    __device__ static void load(const Args &a, int tm, int tk, uint4 (&v)[R]) {
        const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const size_t row = size_t(tm) * TM + ty + r * TY;
            v[r] = __ldg(a.x + (row * a.k + size_t(tk) * TK) / 8 + tx);
        }
    }

    __device__ static unsigned store(const Args &a, int tm, int tk, const uint4 (&v)[R], uint8_t *s, float sc) {
        const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
        unsigned mx = 0;
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int lr = ty + r * TY;
            const uint2 f = encode8<SOFT>(v[r], sc);
            *reinterpret_cast<uint2 *>(a.rows + (size_t(tm) * TM + lr) * a.k + size_t(tk) * TK + tx * 8) = f;
            reinterpret_cast<unsigned *>(s + lr * SROW)[2 * tx] = f.x;
            reinterpret_cast<unsigned *>(s + lr * SROW)[2 * tx + 1] = f.y;
            if (a.amax) mx = max(mx, abs_max8(v[r]));
        }
        __syncthreads();
        for (int item = threadIdx.x; item < ITEMS; item += NT) {
            const int wc = item % (TK / 4), mc = item / (TK / 4);
            unsigned w[16];
#pragma unroll
            for (int i = 0; i < 16; i++) w[i] = reinterpret_cast<const unsigned *>(s + (mc * 16 + i) * SROW)[wc];
#pragma unroll
            for (int b = 0; b < 4; b++) {
                // byte b of w[4j..4j+3] -> word j of output row (tk * TK + 4 wc + b)
                const unsigned sel = b | (b + 4) << 4;
                unsigned o[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const unsigned lo = __byte_perm(w[4 * j], w[4 * j + 1], sel);
                    const unsigned hi = __byte_perm(w[4 * j + 2], w[4 * j + 3], sel);
                    o[j] = __byte_perm(lo, hi, 0x5410);
                }
                const size_t col = size_t(tk) * TK + 4 * wc + b;
                *reinterpret_cast<uint4 *>(a.cols + col * a.m + size_t(tm) * TM + mc * 16) = make_uint4(o[0], o[1], o[2], o[3]);
            }
        }
        return mx;
    }
};

// The tile's (or the block's) amax: each warp's by REDUX, one atomic per block.
template <int NT>
__device__ __forceinline__ void block_amax(const Args &a, unsigned mx) {
    __shared__ unsigned warp_mx[NT / 32];
    mx = __reduce_max_sync(0xFFFFFFFFu, mx);
    if (threadIdx.x % 32 == 0) warp_mx[threadIdx.x / 32] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned t = 0;
#pragma unroll
        for (int i = 0; i < NT / 32; i++) t = max(t, warp_mx[i]);
        // bf16 |x| bits -> float bits: bf16 is the upper half of an fp32.
        atomicMax(a.amax, t << 16);
        if (blockIdx.x == 0 && blockIdx.y == 0) *a.scale_inv = 1.0f / *a.scale;
    }
}

// One tile per block, grid (K / TK, M / TM).
template <int TM, int TK, int R, bool SOFT>
__global__ void __launch_bounds__(Tile<TM, TK, R>::NT) cast_tile(Args a) {
    using T = Tile<TM, TK, R, SOFT>;
    __shared__ __align__(16) uint8_t s[TM * T::SROW];
    uint4 v[R];
    T::load(a, blockIdx.y, blockIdx.x, v);
    const unsigned mx = T::store(a, blockIdx.y, blockIdx.x, v, s, *a.scale);
    if (a.amax) block_amax<T::NT>(a, mx);
}

// Persistent: a fixed grid walks the tiles (K-major order, as the one-tile grid runs them);
// the next tile's loads are issued before the current tile is encoded and stored.
template <int TM, int TK, int R>
__global__ void __launch_bounds__(Tile<TM, TK, R>::NT) cast_persistent(Args a) {
    using T = Tile<TM, TK, R>;
    __shared__ __align__(16) uint8_t s[TM * T::SROW];
    const int tiles_k = a.k / TK, tiles = tiles_k * (a.m / TM);
    const float sc = *a.scale;
    unsigned mx = 0;
    uint4 v[R], next[R];
    int t = blockIdx.x;
    if (t < tiles) T::load(a, t / tiles_k, t % tiles_k, v);
    for (; t < tiles; t += gridDim.x) {
        const int n = t + gridDim.x;
        if (n < tiles) T::load(a, n / tiles_k, n % tiles_k, next);
        mx = max(mx, T::store(a, t / tiles_k, t % tiles_k, v, s, sc));
        __syncthreads();  // the tile in shared memory is read before the next one is written
#pragma unroll
        for (int r = 0; r < R; r++) v[r] = next[r];
    }
    if (a.amax) block_amax<T::NT>(a, mx);
}

struct Kernel {
    std::string name;
    void (*fn)(Args);
    int tm, tk, threads;
    int blocks_per_sm;  // 0: one block per tile
};

template <int TM, int TK, int R, bool SOFT = false>
Kernel tile_kernel() {
    return {"tile_" + std::to_string(TM) + "x" + std::to_string(TK) + "_r" + std::to_string(R) + (SOFT ? "_soft" : ""),
            cast_tile<TM, TK, R, SOFT>, TM, TK, Tile<TM, TK, R>::NT, 0};
}
template <int TM, int TK, int R>
Kernel persistent_kernel(int bps) {
    return {"persistent_" + std::to_string(TM) + "x" + std::to_string(TK) + "_r" + std::to_string(R) + "_b" +
                std::to_string(bps),
            cast_persistent<TM, TK, R>, TM, TK, Tile<TM, TK, R>::NT, bps};
}

std::vector<Kernel> kernels() {
    return {tile_kernel<64, 64, 8>(),
            tile_kernel<64, 64, 4>(),
            tile_kernel<64, 64, 16>(),
            tile_kernel<128, 64, 8>(),
            tile_kernel<128, 64, 16>(),
            tile_kernel<64, 128, 8>(),
            tile_kernel<128, 128, 16>(),
            tile_kernel<64, 64, 8, true>(),
            tile_kernel<64, 64, 4, true>(),
            tile_kernel<128, 64, 8, true>(),
            tile_kernel<128, 64, 16, true>(),
            persistent_kernel<64, 64, 8>(8),
            persistent_kernel<64, 64, 8>(16),
            persistent_kernel<64, 64, 4>(16),
            persistent_kernel<128, 64, 8>(8)};
}

void launch(const Kernel &kern, int sms, const Args &a) {
    if (a.amax) CHECK(cudaMemsetAsync(a.amax, 0, 4, nullptr));
    const int tiles_k = a.k / kern.tk, tiles_m = a.m / kern.tm;
    if (kern.blocks_per_sm == 0) {
        kern.fn<<<dim3(tiles_k, tiles_m), kern.threads>>>(a);
    } else {
        kern.fn<<<std::min(tiles_k * tiles_m, kern.blocks_per_sm * sms), kern.threads>>>(a);
    }
    CHECK(cudaGetLastError());
}

// Finite bf16 with magnitudes 2^-14 .. 2^10 and either sign (e4m3's subnormals, normals and
// saturation after the scale of 2), as schedx-explore's cast inputs.
uint16_t input_bits(size_t i) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ uint32_t(i >> 32);
    h ^= h >> 16, h *= 0x85EBCA6Bu, h ^= h >> 13, h *= 0xC2B2AE35u, h ^= h >> 16;
    return uint16_t(((h >> 15) & 1) << 15 | (127 - 14 + h % 24) << 7 | ((h >> 8) & 0x7F));
}

struct Buffers {
    explore::Pool x, rows, cols, scalars, scale;
    Buffers(explore::Backend &b, size_t n, int sets)
        : x(b, 2 * n, sets), rows(b, n, sets), cols(b, n, sets), scalars(b, 8, sets), scale(b, 4, 1) {}
    Args args(int set, int m, int k, bool amax) const {
        unsigned *s = reinterpret_cast<unsigned *>(scalars.at(set));
        return {reinterpret_cast<const uint4 *>(x.at(set)), reinterpret_cast<const float *>(scale.at(0)), rows.at(set),
                cols.at(set), amax ? s : nullptr, reinterpret_cast<float *>(s + 1), m, k};
    }
};

}  // namespace

int main(int argc, char **argv) {
    std::vector<std::string> shapes = {"4096x4096", "8192x8192", "4096x14336", "16384x4096"};
    std::vector<std::string> schedx_variants = {"cast_transpose_bf16_e4m3_t64r8w4", "cast_transpose_bf16_e4m3_t64r4w8",
                                                "cast_transpose_bf16_e4m3_t128r16w4"};
    std::string schedx_amax = "cast_transpose_bf16_e4m3_t64r8w4_amax";
    bool dirty_cache = false;
    CLI::App app{"Hand-written sm_90 CUDA fp8 cast + transpose against a copy and schedx, timed as schedx-explore times."};
    app.add_option("--shapes", shapes, "MxK,... (multiples of 128)")->delimiter(',');
    app.add_option("--schedx", schedx_variants, "schedx variants to time beside them")->delimiter(',');
    app.add_flag("--dirty-cache", dirty_cache, "time each launch alone after dirtying L2, as do_bench does");
    CLI11_PARSE(app, argc, argv);
    const CudaBench bench = cuda_bench_or_exit("schedx-cast-anchor");
    const std::unique_ptr<explore::Backend> &b = bench.backend;
    const int sms = bench.sms;
    const explore::Timing timing{7, dirty_cache};
    const std::vector<Kernel> ks = kernels();

    std::printf("# fp8 cast + transpose: hand-written sm_90 CUDA, schedx and a copy, %s (%d SMs)\n\n", b->name().c_str(), sms);
    std::printf("bf16 -> e4m3fn, scale 2, both outputs; median us of %d samples, %s. 'copy': cudaMemcpyAsync of x "
                "(the same 4 bytes per element). '+amax': the kernel also takes max|x| into a word zeroed by a "
                "4-byte memset on the stream before it. Every hand kernel's rows, cols and amax equal schedx's bit for "
                "bit (checked before timing).\n\n",
                timing.repeats, dirty_cache ? "each call alone after dirtying L2 (do_bench's condition)" : "back to back");
    for (const std::string &shape : shapes) {
        int m = 0, k = 0;
        if (std::sscanf(shape.c_str(), "%dx%d", &m, &k) != 2 || m <= 0 || k <= 0 || m % 128 || k % 128) {
            std::fprintf(stderr, "schedx-cast-anchor: bad shape %s (MxK, multiples of 128)\n", shape.c_str());
            return 1;
        }
        const size_t n = size_t(m) * size_t(k), bytes = 4 * n;
        const int sets = std::max(2, explore::rotation_sets(*b, bytes));
        Buffers buf(*b, n, sets);
        {
            std::vector<uint16_t> host(n);
            for (size_t i = 0; i < n; i++) host[i] = input_bits(i);
            for (int s = 0; s < sets; s++) b->upload(buf.x.at(s), host.data(), 2 * n);
            const float scale = 2.0f;
            b->upload(buf.scale.at(0), &scale, 4);
            b->fill(buf.rows.at(0), 0xA5, buf.rows.slot_bytes() * sets);
            b->fill(buf.cols.at(0), 0xA5, buf.cols.slot_bytes() * sets);
        }
        auto time_us = [&](const std::function<void(int)> &f) { return explore::measure(*b, f, sets, timing).median_us; };
        auto force = [](const std::string &variant) {
            if (schedx_force_variant("cast_transpose", variant.c_str()) != SCHEDX_OK) {
                std::fprintf(stderr, "schedx-cast-anchor: %s\n", schedx_last_error());
                std::exit(1);
            }
        };
        auto run_schedx = [&](int s, bool amax) {
            const Args a = buf.args(s, m, k, amax);
            const schedx_status st = schedx_cast_transpose_fp8(
                buf.x.at(s), m, k, k, SCHEDX_BF16, a.scale, SCHEDX_E4M3FN, a.rows, k, a.cols, m,
                amax ? reinterpret_cast<float *>(a.amax) : nullptr, amax ? a.scale_inv : nullptr, SCHEDX_DEVICE_CUDA, nullptr);
            if (st != SCHEDX_OK) {
                std::fprintf(stderr, "schedx: %s\n", schedx_last_error());
                std::exit(1);
            }
        };
        // schedx's output on set 0 is the reference for every hand kernel (schedx's own is
        // checked against the tests' independent encoder by schedx-explore).
        std::vector<uint8_t> want_rows(n), want_cols(n), got(n);
        unsigned want_amax = 0, got_amax = 0;
        force(schedx_amax);
        run_schedx(0, true);
        CHECK(cudaDeviceSynchronize());
        b->download(want_rows.data(), buf.rows.at(0), n);
        b->download(want_cols.data(), buf.cols.at(0), n);
        b->download(&want_amax, buf.scalars.at(0), 4);

        std::printf("## %s\n\n| kernel | us | %% of copy | +amax us | amax cost |\n|---|---|---|---|---|\n", shape.c_str());
        const double copy = time_us([&](int s) { b->copy(buf.x.at((s + 1) % sets), buf.x.at(s), 2 * n); });
        std::printf("| copy of x | %.2f | 100%% | | |\n", copy);
        // The copy writes x over another set's x: every set holds the same input.
        auto row = [&](const std::string &name, const std::function<void(int)> &plain_fn,
                       const std::function<void(int)> &amax_fn) {
            const double plain = time_us(plain_fn);
            if (!amax_fn) {
                std::printf("| %s | %.2f | %.1f%% | | |\n", name.c_str(), plain, 100 * copy / plain);
            } else {
                const double amax = time_us(amax_fn);
                std::printf("| %s | %.2f | %.1f%% | %.2f | %.1f%% |\n", name.c_str(), plain, 100 * copy / plain, amax,
                            100 * (amax / plain - 1));
            }
            std::fflush(stdout);
        };
        for (const std::string &v : schedx_variants) {
            force(v);
            row("schedx " + v, [&](int s) { run_schedx(s, false); }, nullptr);
        }
        force(schedx_amax);
        row("schedx " + schedx_amax + " (+amax only)", [&](int s) { run_schedx(s, true); }, nullptr);
        for (const Kernel &kern : ks) {
            b->fill(buf.rows.at(1), 0xA5, n);
            b->fill(buf.cols.at(1), 0xA5, n);
            launch(kern, sms, buf.args(1, m, k, true));
            CHECK(cudaDeviceSynchronize());
            b->download(got.data(), buf.rows.at(1), n);
            const bool rows_ok = got == want_rows;
            b->download(got.data(), buf.cols.at(1), n);
            const bool cols_ok = got == want_cols;
            b->download(&got_amax, buf.scalars.at(1), 4);
            if (!rows_ok || !cols_ok || got_amax != want_amax) {
                std::printf("| %s | differs from schedx (rows %s, cols %s, amax %08x vs %08x) | | | |\n", kern.name.c_str(),
                            rows_ok ? "ok" : "differ", cols_ok ? "ok" : "differ", got_amax, want_amax);
                continue;
            }
            row(kern.name, [&](int s) { launch(kern, sms, buf.args(s, m, k, false)); },
                [&](int s) { launch(kern, sms, buf.args(s, m, k, true)); });
        }
        std::printf("\n");
    }
    return 0;
}
