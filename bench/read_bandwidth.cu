// schedx-read-bandwidth: the read-only bandwidth anchor of issue 3 ("M = 1 reaches 85% of a
// read-only bandwidth measurement"), measured at the sizes the operators read, in the way
// schedx-explore times them: back-to-back launches over buffers rotated so that the working
// set is several times the L2, median of repeats. A kernel of a few tens of us pays a fixed
// ramp and drain of its own; timing the pure read at the same size shows how much of a
// GEMV's gap to the large-copy ceiling is that fixed cost.
// --dirty-cache times each launch alone after a write of 4x the L2, as schedx-explore
// --dirty-cache and triton's do_bench do: the condition the torch anchors are measured in.
// Usage: schedx-read-bandwidth [--dirty-cache] [MiB,MiB,...]   (default 16,56,64,1024)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                                                  \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(1);                                                                            \
        }                                                                                            \
    } while (0)

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

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Where a dirty-cache timing writes before each launch (4x the L2), or null: back to back.
struct Dirtier {
    char *scratch = nullptr;
    size_t bytes = 0;
};

// Median over `repeats` samples of the mean time of `launch(set)` calls, sets rotating: back
// to back, each sample about 20 ms long; or each call alone after dirtying L2 (50 a sample).
template <typename F>
double time_us(F launch, int sets, cudaStream_t stream, const Dirtier &dirty, int repeats = 7) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    int next = 0;
    auto sample = [&](int n) {
        double total_ms = 0;
        for (int done = 0; done < n;) {
            const int calls = dirty.scratch ? 1 : n;
            if (dirty.scratch) CHECK(cudaMemsetAsync(dirty.scratch, done & 0xFF, dirty.bytes, stream));
            CHECK(cudaEventRecord(a, stream));
            for (int i = 0; i < calls; i++) launch(next++ % sets);
            CHECK(cudaEventRecord(b, stream));
            CHECK(cudaEventSynchronize(b));
            float ms = 0;
            CHECK(cudaEventElapsedTime(&ms, a, b));
            total_ms += ms;
            done += calls;
        }
        return 1000.0 * total_ms / n;
    };
    sample(3);
    const int most = dirty.scratch ? 50 : 20000;
    const int n = std::clamp(int(20000.0 / std::max(sample(5), 0.5)), 5, most);
    std::vector<double> t;
    for (int r = 0; r < repeats; r++) t.push_back(sample(n));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return median(t);
}

// An L2 access-policy window with the streaming property over [base, base + bytes), as
// schedx's runtime sets per launch around W (cuda_interop.h), here on the stream.
void set_window(cudaStream_t stream, const void *base, size_t bytes, size_t max_window) {
    cudaStreamAttrValue v = {};
    if (base) {
        v.accessPolicyWindow.base_ptr = const_cast<void *>(base);
        v.accessPolicyWindow.num_bytes = std::min(bytes, max_window);
        v.accessPolicyWindow.hitRatio = 1.0f;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
        v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    } else {
        v.accessPolicyWindow.missProp = cudaAccessPropertyNormal;
        v.accessPolicyWindow.hitProp = cudaAccessPropertyNormal;
    }
    CHECK(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v));
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<size_t> mibs = {16, 56, 64, 1024};
    bool dirty_cache = false;
    for (int i = 1; i < argc; i++) {
        const std::string arg = argv[i];
        if (arg == "--dirty-cache") {
            dirty_cache = true;
            continue;
        }
        mibs.clear();
        std::stringstream s(arg);
        for (std::string item; std::getline(s, item, ',');) mibs.push_back(std::stoul(item));
    }
    int dev = 0, sms = 0, l2 = 0, max_window = 0;
    CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    unsigned *sink;
    CHECK(cudaMalloc(&sink, sizeof(unsigned)));
    const std::vector<Config> kernels = configs();
    Dirtier dirty;
    if (dirty_cache) {
        dirty.bytes = 4 * size_t(l2);
        CHECK(cudaMalloc(&dirty.scratch, dirty.bytes));
    }

    std::printf("# Read-only bandwidth, %s (%d SMs, %d MiB L2)\n\n", prop.name, sms, l2 >> 20);
    if (dirty_cache) {
        std::printf("Each launch timed alone after a write of %d MiB (4x the L2) left it full of dirty lines, as "
                    "do_bench's flush does; buffers rotated, median of 7 samples of up to 50 launches.\n",
                    4 * (l2 >> 20));
    } else {
        std::printf("Back-to-back launches over buffers rotated through >= 8x the L2, median of 7 samples of ~20 ms.\n");
    }
    std::printf("'read' is the fastest of %zu read-only kernels (16-byte loads); 'window' the same kernel with an L2\n"
                "streaming window over its buffer; 'copy' a cudaMemcpyAsync moving the same bytes (half read, half "
                "written).\n\n",
                kernels.size());
    std::printf("| MiB read | best read kernel | read us | read GB/s | window us | window GB/s | copy us | copy GB/s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (size_t mib : mibs) {
        const size_t bytes = mib << 20, vectors = bytes / 16;
        const int sets = int(std::max<size_t>(2, (8 * size_t(l2) + bytes - 1) / bytes));
        std::vector<char *> bufs(sets);
        for (auto &p : bufs) {
            CHECK(cudaMalloc(&p, bytes));
            CHECK(cudaMemsetAsync(p, 0x5A, bytes, stream));  // never time on zeros
        }
        CHECK(cudaStreamSynchronize(stream));
        auto run = [&](const Config &c, int s) {
            const int block_count = c.blocks_per_sm ? c.blocks_per_sm * sms
                                                    : int((vectors + size_t(c.threads) * c.unroll - 1) /
                                                          (size_t(c.threads) * c.unroll));
            c.kernel<<<block_count, c.threads, 0, stream>>>(reinterpret_cast<const uint4 *>(bufs[s]), vectors,
                                                             0xDEADBEEFu, sink);
        };
        double best = 1e30;
        const Config *best_c = nullptr;
        for (const Config &c : kernels) {
            const double us = time_us([&](int s) { run(c, s); }, sets, stream, dirty);
            CHECK(cudaGetLastError());
            if (us < best) best = us, best_c = &c;
        }
        // The window covers one buffer at a time, reset before each launch as the runtime does.
        const double windowed = time_us(
            [&](int s) {
                set_window(stream, bufs[s], bytes, size_t(max_window));
                run(*best_c, s);
            },
            sets, stream, dirty);
        set_window(stream, nullptr, 0, 0);
        const double copy = time_us([&](int s) { CHECK(cudaMemcpyAsync(bufs[s], bufs[(s + 1) % sets] + bytes / 2,
                                                                       bytes / 2, cudaMemcpyDeviceToDevice, stream)); },
                                    sets, stream, dirty);
        std::printf("| %zu | %s | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f |\n", mib, best_c->name.c_str(), best,
                    bytes / best / 1e3, windowed, bytes / windowed / 1e3, copy, bytes / copy / 1e3);
        std::fflush(stdout);
        for (char *p : bufs) CHECK(cudaFree(p));
    }
    CHECK(cudaFree(sink));
    if (dirty.scratch) CHECK(cudaFree(dirty.scratch));
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
