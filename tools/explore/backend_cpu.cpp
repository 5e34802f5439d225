#include <unistd.h>

#include <HalideRuntime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "backend.h"
#include "tuning_db.h"

namespace explore {
namespace {

// One anchor call's bytes, cut in chunks for halide_do_par_for's tasks.
struct Chunks {
    uint8_t *dst;
    const uint8_t *src;
    size_t bytes, chunk;
    std::atomic<uint64_t> sink;
    int count() const { return int((bytes + chunk - 1) / chunk); }
    size_t size_of(int i) const { return std::min(chunk, bytes - size_t(i) * chunk); }
};

// Chunks of 64 KiB or more, about 8 per thread: few enough that a task's start costs
// little, enough that threads finishing early take more. 8-byte multiples.
size_t chunk_bytes(size_t bytes) {
    const size_t per = bytes / (8 * size_t(std::max(1, halide_get_num_threads())));
    return std::max<size_t>(size_t(64) << 10, (per + 7) / 8 * 8);
}

int copy_chunk(void *, int i, uint8_t *closure) {
    auto *c = reinterpret_cast<Chunks *>(closure);
    std::memcpy(c->dst + size_t(i) * c->chunk, c->src + size_t(i) * c->chunk, c->size_of(i));
    return 0;
}

int read_chunk(void *, int i, uint8_t *closure) {
    auto *c = reinterpret_cast<Chunks *>(closure);
    const size_t n = c->size_of(i) / 8;
    // 8-byte aligned: Pool slots start on 256 bytes, chunks are 8-byte multiples.
    const uint64_t *p = reinterpret_cast<const uint64_t *>(c->src + size_t(i) * c->chunk);
    // Eight independent accumulators, so the loop is bound by loads, not by one chain of xors.
    uint64_t words[8] = {};
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        for (int u = 0; u < 8; u++) words[u] ^= p[j + u];
    }
    for (; j < n; j++) words[0] ^= p[j];
    uint64_t acc = 0;
    for (uint64_t w : words) acc ^= w;
    c->sink.fetch_xor(acc, std::memory_order_relaxed);
    return 0;
}

class CpuBackend : public Backend {
public:
    schedx_device device() const override { return SCHEDX_DEVICE_CPU; }
    const char *device_kind() const override { return "cpu"; }
    std::string name() const override { return schedx::device_stamp(schedx::Device::cpu).device_name; }
    size_t cache_bytes() const override {
        const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
        return l3 > 0 ? size_t(l3) : size_t(32) << 20;  // sysconf reports 0 where unknown
    }
    void *alloc(size_t bytes) override {
        void *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
        if (!p) throw std::runtime_error("out of host memory allocating " + std::to_string(bytes) + " bytes");
        return p;
    }
    void release(void *p) override { std::free(p); }
    void upload(void *dst, const void *host, size_t bytes) override { std::memcpy(dst, host, bytes); }
    void download(void *host, const void *src, size_t bytes) override { std::memcpy(host, src, bytes); }
    void fill(void *dst, uint8_t byte, size_t bytes) override { std::memset(dst, byte, bytes); }
    // The anchors run on Halide's thread pool, as the variants do: the same threads
    // (HL_NUM_THREADS, schedx_set_num_threads, else one per core), in chunks of the bytes.
    void copy(void *dst, const void *src, size_t bytes) override {
        Chunks c{static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src), bytes, chunk_bytes(bytes), 0};
        halide_do_par_for(nullptr, copy_chunk, 0, c.count(), reinterpret_cast<uint8_t *>(&c));
    }
    void read(const void *src, size_t bytes) override {
        Chunks c{nullptr, static_cast<const uint8_t *>(src), bytes, chunk_bytes(bytes), 0};
        halide_do_par_for(nullptr, read_chunk, 0, c.count(), reinterpret_cast<uint8_t *>(&c));
        sink_ = c.sink;  // volatile: the reads are not dropped
    }
    double elapsed_us(const std::function<void(int)> &launch, int n) override {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++) launch(i);
        return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    }
    double elapsed_us_dirty(const std::function<void(int)> &launch, int n) override {
        dirt_.resize(kDirtyCacheFactor * cache_bytes());
        double us = 0;
        for (int i = 0; i < n; i++) {
            std::memset(dirt_.data(), i & 0xFF, dirt_.size());
            const auto start = std::chrono::steady_clock::now();
            launch(i);
            us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        }
        return us;
    }

private:
    std::vector<uint8_t> dirt_;
    volatile uint64_t sink_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace explore
