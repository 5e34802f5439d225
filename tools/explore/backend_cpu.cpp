#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "backend.h"
#include "tuning_db.h"

namespace explore {
namespace {

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
    void copy(void *dst, const void *src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void read(const void *src, size_t bytes) override {
        const uint64_t *words = static_cast<const uint64_t *>(src);
        uint64_t acc = 0;
        for (size_t i = 0; i < bytes / 8; i++) acc ^= words[i];
        sink_ = acc;  // volatile: the loop is not dropped
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
