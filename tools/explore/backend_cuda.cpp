// Built with the CUDA runtime only when CMake found the CUDA Toolkit; either way the tool
// falls back to the CPU on a machine without a usable GPU.
#include "backend.h"

#ifdef SCHEDX_EXPLORE_CUDA
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "tuning_db.h"

namespace explore {
namespace {

void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Everything runs on the legacy default stream, as schedx calls with stream NULL do.
class CudaBackend : public Backend {
public:
    explicit CudaBackend(size_t l2_bytes) : l2_bytes_(l2_bytes) {
        check(cudaEventCreate(&start_), "cudaEventCreate");
        check(cudaEventCreate(&stop_), "cudaEventCreate");
    }
    ~CudaBackend() override {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
        for (cudaEvent_t e : marks_) cudaEventDestroy(e);
        if (dirt_) cudaFree(dirt_);
    }
    schedx_device device() const override { return SCHEDX_DEVICE_CUDA; }
    const char *device_kind() const override { return "cuda"; }
    std::string name() const override { return schedx::device_stamp(schedx::Device::cuda).device_name; }
    size_t cache_bytes() const override { return l2_bytes_; }
    void *alloc(size_t bytes) override {
        void *p = nullptr;
        check(cudaMalloc(&p, bytes), "cudaMalloc");
        return p;
    }
    void release(void *p) override { cudaFree(p); }
    void upload(void *dst, const void *host, size_t bytes) override {
        check(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    }
    void download(void *host, const void *src, size_t bytes) override {
        check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    }
    void fill(void *dst, uint8_t byte, size_t bytes) override { check(cudaMemset(dst, byte, bytes), "cudaMemset"); }
    void copy(void *dst, const void *src, size_t bytes) override {
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr), "cudaMemcpyAsync");
    }
    double elapsed_us(const std::function<void(int)> &launch, int n) override {
        check(cudaEventRecord(start_, nullptr), "cudaEventRecord");
        for (int i = 0; i < n; i++) launch(i);
        check(cudaEventRecord(stop_, nullptr), "cudaEventRecord");
        check(cudaEventSynchronize(stop_), "kernel or cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        return ms * 1e3;
    }
    double elapsed_us_dirty(const std::function<void(int)> &launch, int n) override {
        const size_t dirt_bytes = kDirtyCacheFactor * l2_bytes_;
        if (!dirt_) dirt_ = alloc(dirt_bytes);
        while (marks_.size() < 2 * size_t(n)) {
            cudaEvent_t e;
            check(cudaEventCreate(&e), "cudaEventCreate");
            marks_.push_back(e);
        }
        for (int i = 0; i < n; i++) {
            check(cudaMemsetAsync(dirt_, i & 0xFF, dirt_bytes, nullptr), "cudaMemsetAsync");
            check(cudaEventRecord(marks_[2 * i], nullptr), "cudaEventRecord");
            launch(i);
            check(cudaEventRecord(marks_[2 * i + 1], nullptr), "cudaEventRecord");
        }
        check(cudaEventSynchronize(marks_[2 * n - 1]), "kernel or cudaEventSynchronize");
        double us = 0;
        for (int i = 0; i < n; i++) {
            float ms = 0;
            check(cudaEventElapsedTime(&ms, marks_[2 * i], marks_[2 * i + 1]), "cudaEventElapsedTime");
            us += ms * 1e3;
        }
        return us;
    }

private:
    size_t l2_bytes_;
    cudaEvent_t start_, stop_;
    std::vector<cudaEvent_t> marks_;  // a start and a stop per call of elapsed_us_dirty
    void *dirt_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::string *why) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        *why = e != cudaSuccess ? std::string("no usable GPU: ") + cudaGetErrorString(e) : "no CUDA device";
        return nullptr;
    }
    cudaDeviceProp prop{};
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) {
        *why = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(e);
        return nullptr;
    }
    if (schedx::device_stamp(schedx::Device::cuda).device_name.empty()) {
        *why = "libschedx cannot load the CUDA driver";
        return nullptr;
    }
    return std::make_unique<CudaBackend>(size_t(prop.l2CacheSize));
}

}  // namespace explore

#else

namespace explore {
std::unique_ptr<Backend> make_cuda_backend(std::string *why) {
    *why = "schedx-explore was built without the CUDA Toolkit";
    return nullptr;
}
}  // namespace explore

#endif
