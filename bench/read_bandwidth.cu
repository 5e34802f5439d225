// schedx-read-bandwidth: the read-only bandwidth anchor of issue 3 ("M = 1 reaches 85% of a
// read-only bandwidth measurement"), measured at the sizes the operators read and timed by
// schedx-explore's own code (tools/explore/measure.h: buffers rotated past twice the L2,
// median of repeats, on the legacy default stream). A kernel of a few tens of us pays a
// fixed ramp and drain of its own; timing the pure read at the same size shows how much of
// a GEMV's gap to the large-copy ceiling is that fixed cost.
// --dirty-cache times each launch alone after a write of 4x the L2, as schedx-explore
// --dirty-cache and triton's do_bench do: the condition the torch anchors are measured in.
// Usage: schedx-read-bandwidth [--dirty-cache] [MiB,MiB,...]   (default 16,56,64,1024)
#include <CLI/CLI.hpp>
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

namespace {

// Each block reads one contiguous chunk of THREADS * U 16-byte vectors, every thread U of
// them a block-width apart (coalesced), all U loads issued before any is used. The xor of
// everything read is stored only if it equals `never`, a value the host picks so that it
// does not occur: the loads cannot be dropped and nothing is written.
template <int U>
__global__ void read_chunks(const uint4 *__restrict__ src, size_t vectors, unsigned never, unsigned *sink) {
    const size_t base = size_t(blockIdx.x) * blockDim.x * U + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const size_t i = base + size_t(u) * blockDim.x;
        v[u] = i < vectors ? __ldg(src + i) : make_uint4(0, 0, 0, 0);
    }
    unsigned acc = 0;
#pragma unroll
    for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    if (acc == never) *sink = acc;
}

// Grid-stride form: a fixed grid (blocks per SM x SMs), each thread U loads in flight per step.
template <int U>
__global__ void read_strided(const uint4 *__restrict__ src, size_t vectors, unsigned never, unsigned *sink) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (; i + (U - 1) * stride < vectors; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = __ldg(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < vectors; i += stride) {
        const uint4 v = __ldg(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == never) *sink = acc;
}

struct Config {
    std::string name;
    void (*kernel)(const uint4 *, size_t, unsigned, unsigned *);
    int threads;
    int blocks_per_sm;  // 0: one block per chunk (read_chunks)
    int unroll;
};

std::vector<Config> configs() {
    std::vector<Config> c;
    for (int t : {256, 512}) {
        c.push_back({"chunks_t" + std::to_string(t) + "_u4", read_chunks<4>, t, 0, 4});
        c.push_back({"chunks_t" + std::to_string(t) + "_u8", read_chunks<8>, t, 0, 8});
        c.push_back({"chunks_t" + std::to_string(t) + "_u16", read_chunks<16>, t, 0, 16});
        for (int b : {2, 4, 8}) {
            if (t * b > 2048) continue;
            c.push_back({"strided_t" + std::to_string(t) + "_b" + std::to_string(b) + "_u4", read_strided<4>, t, b, 4});
            c.push_back({"strided_t" + std::to_string(t) + "_b" + std::to_string(b) + "_u8", read_strided<8>, t, b, 8});
        }
    }
    return c;
}

// A launch of `c` over `bytes` at `buf` on the legacy default stream; with `window`, an L2
// access-policy window with the streaming property over the buffer as a launch attribute,
// as schedx's runtime launches w8_linear's kernels over W (cuda_interop.h).
void launch(const Config &c, int sms, const void *buf, size_t bytes, bool window, size_t max_window, unsigned *sink) {
    const size_t vectors = bytes / 16;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(c.blocks_per_sm ? unsigned(c.blocks_per_sm * sms)
                                          : unsigned((vectors + size_t(c.threads) * c.unroll - 1) /
                                                     (size_t(c.threads) * c.unroll)));
    config.blockDim = dim3(unsigned(c.threads));
    cudaLaunchAttribute attr = {};
    if (window) {
        attr.id = cudaLaunchAttributeAccessPolicyWindow;
        attr.val.accessPolicyWindow.base_ptr = const_cast<void *>(buf);
        attr.val.accessPolicyWindow.num_bytes = std::min(bytes, max_window);
        attr.val.accessPolicyWindow.hitRatio = 1.0f;
        attr.val.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
        attr.val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
        config.attrs = &attr;
        config.numAttrs = 1;
    }
    CHECK(cudaLaunchKernelEx(&config, c.kernel, static_cast<const uint4 *>(buf), vectors, 0xDEADBEEFu, sink));
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<size_t> mibs = {16, 56, 64, 1024};
    bool dirty_cache = false;
    CLI::App app{"Read-only bandwidth at the sizes the operators read, timed as schedx-explore times variants."};
    app.add_option("mibs", mibs, "MiB to read, e.g. 16,56,64,1024")->delimiter(',')->check(CLI::Range(1, 1 << 20));
    app.add_flag("--dirty-cache", dirty_cache, "time each launch alone after dirtying L2, as do_bench does");
    CLI11_PARSE(app, argc, argv);
    const CudaBench bench = cuda_bench_or_exit("schedx-read-bandwidth");
    const std::unique_ptr<explore::Backend> &b = bench.backend;
    const int dev = bench.device, sms = bench.sms;
    int max_window = 0;
    CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev));
    const explore::Timing timing{7, dirty_cache};
    unsigned *sink = static_cast<unsigned *>(b->alloc(sizeof(unsigned)));
    const std::vector<Config> kernels = configs();

    std::printf("# Read-only bandwidth, %s (%d SMs, %zu MiB L2)\n\n", b->name().c_str(), sms, b->cache_bytes() >> 20);
    std::printf("Timed as schedx-explore%s times variants (tools/explore/measure.h): %s, buffers rotated past twice "
                "the L2, median of %d samples.\n",
                dirty_cache ? " --dirty-cache" : "",
                dirty_cache ? "each launch alone after a write of 4x the L2 left it full of dirty lines, as do_bench's "
                              "flush does"
                            : "back-to-back launches",
                timing.repeats);
    std::printf("'read' is the fastest of %zu read-only kernels (16-byte loads); 'window' the same kernel with an L2\n"
                "streaming window over its buffer; 'copy' a cudaMemcpyAsync moving the same bytes (half read, half "
                "written).\n\n",
                kernels.size());
    std::printf("| MiB read | best read kernel | read us | read GB/s | window us | window GB/s | copy us | copy GB/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (size_t mib : mibs) {
        const size_t bytes = mib << 20;
        const int sets = std::max(2, explore::rotation_sets(*b, bytes));
        explore::Pool bufs(*b, bytes, sets);
        b->fill(bufs.at(0), 0x5A, bufs.slot_bytes() * size_t(sets));  // never time on zeros
        auto time_us = [&](const std::function<void(int)> &f) { return explore::measure(*b, f, sets, timing).median_us; };
        double best = 1e30;
        const Config *best_c = nullptr;
        for (const Config &c : kernels) {
            const double us = time_us([&](int s) { launch(c, sms, bufs.at(s), bytes, false, 0, sink); });
            if (us < best) best = us, best_c = &c;
        }
        const double windowed =
            time_us([&](int s) { launch(*best_c, sms, bufs.at(s), bytes, true, size_t(max_window), sink); });
        const double copy = time_us([&](int s) { b->copy(bufs.at(s), bufs.at((s + 1) % sets) + bytes / 2, bytes / 2); });
        std::printf("| %zu | %s | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f |\n", mib, best_c->name.c_str(), best,
                    bytes / best / 1e3, windowed, bytes / windowed / 1e3, copy, bytes / copy / 1e3);
        std::fflush(stdout);
    }
    b->release(sink);
    return 0;
}
