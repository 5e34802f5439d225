// Where schedx-explore runs the variants: memory, copies, timing and the cache size that
// buffer rotation must exceed. One implementation per device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "schedx/schedx.h"

namespace explore {

class Backend {
public:
    virtual ~Backend() = default;
    virtual schedx_device device() const = 0;
    virtual const char *device_kind() const = 0;  // "cpu" or "cuda", as in the registry
    virtual std::string name() const = 0;         // as the tuning database stamps it
    virtual size_t cache_bytes() const = 0;       // last-level cache (L2 on the GPU, L3 on the CPU)
    // Memory the operators take on this device; alloc throws std::runtime_error on failure.
    virtual void *alloc(size_t bytes) = 0;
    virtual void release(void *p) = 0;
    virtual void upload(void *dst, const void *host, size_t bytes) = 0;
    virtual void download(void *host, const void *src, size_t bytes) = 0;
    virtual void fill(void *dst, uint8_t byte, size_t bytes) = 0;
    // Queues a device-to-device copy (a plain memcpy on the CPU): the bandwidth ceiling.
    virtual void copy(void *dst, const void *src, size_t bytes) = 0;
    // Queues a read of `bytes` at `src` (256-byte aligned) that writes nothing: the ceiling
    // of operators that only read. CUDA: 16-byte loads, 8 in flight per thread, from a
    // kernel written in PTX here (independent of the Halide kernels it judges).
    virtual void read(const void *src, size_t bytes) = 0;
    // Microseconds for launch(0) .. launch(n - 1) issued back to back, until all finished.
    virtual double elapsed_us(const std::function<void(int)> &launch, int n) = 0;
    // The sum of launch(0) .. launch(n - 1)'s times, each call timed alone right after a
    // write of kDirtyCacheFactor x the cache, which leaves the cache full of dirty lines
    // (what triton.testing.do_bench's flush does, and so the conditions of the torch anchors).
    virtual double elapsed_us_dirty(const std::function<void(int)> &launch, int n) = 0;
};

constexpr size_t kDirtyCacheFactor = 4;

std::unique_ptr<Backend> make_cpu_backend();
// nullptr, with the reason in `why`, when no CUDA device is usable.
std::unique_ptr<Backend> make_cuda_backend(std::string *why);

// `sets` slots of `slot_bytes` each (rounded up to 256 bytes, so every slot keeps the
// alignment the tiled variants need), rotated through while timing.
class Pool {
public:
    Pool(Backend &b, size_t slot_bytes, int sets)
        : backend_(b), slot_((slot_bytes + 255) / 256 * 256), sets_(sets),
          base_(static_cast<uint8_t *>(b.alloc(slot_ * size_t(sets)))) {}
    ~Pool() { backend_.release(base_); }
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;
    uint8_t *at(int set) const { return base_ + slot_ * size_t(set); }
    size_t slot_bytes() const { return slot_; }
    int sets() const { return sets_; }

private:
    Backend &backend_;
    size_t slot_;
    int sets_;
    uint8_t *base_;
};

// How many buffer sets of `bytes_per_set` make a working set above twice the cache
// (../shared/GPU.md), capped so tiny shapes do not allocate thousands of slots.
inline int rotation_sets(const Backend &b, uint64_t bytes_per_set) {
    constexpr uint64_t kMaxSets = 4096;
    const uint64_t sets = 2 * uint64_t(b.cache_bytes()) / bytes_per_set + 1;
    return int(sets < kMaxSets ? sets : kMaxSets);
}

}  // namespace explore
