// Built with the CUDA runtime only when CMake found the CUDA Toolkit; either way the tool
// falls back to the CPU on a machine without a usable GPU.
#include "backend.h"

#ifdef SCHEDX_EXPLORE_CUDA
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tuning_db.h"

namespace explore {
namespace {

void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The read-only anchor: each thread of a 256-thread block loads kReadUnroll 16-byte vectors
// a block-width apart (coalesced), all before any is used, and xors them; the result is
// stored only if it equals `never` (a value the data does not give), so nothing is written
// and the loads stay. Written in PTX so that the anchor needs no CUDA compiler at build time.
constexpr int kReadThreads = 256, kReadUnroll = 8;
std::string read_anchor_ptx() {
    std::string p =
        ".version 7.8\n.target sm_80\n.address_size 64\n"
        ".visible .entry schedx_read_anchor(.param .u64 src, .param .u64 vectors, .param .u32 never, .param .u64 sink)\n"
        "{\n.reg .pred %p<2>;\n.reg .b32 %r<8>;\n.reg .b32 %v<" + std::to_string(4 * kReadUnroll) + ">;\n.reg .b64 %rd<8>;\n"
        "ld.param.u64 %rd0, [src];\ncvta.to.global.u64 %rd0, %rd0;\nld.param.u64 %rd1, [vectors];\n"
        "mov.u32 %r0, %ctaid.x;\nmov.u32 %r1, %tid.x;\n"
        // the thread's first vector: ctaid * threads * unroll + tid
        "mul.wide.u32 %rd2, %r0, " + std::to_string(kReadThreads * kReadUnroll) + ";\ncvt.u64.u32 %rd3, %r1;\nadd.s64 %rd2, %rd2, %rd3;\n";
    for (int u = 0; u < kReadUnroll; u++) {
        const std::string v = "%v" + std::to_string(4 * u);
        p += "mov.b32 " + v + ", 0;\nmov.b32 %v" + std::to_string(4 * u + 1) + ", 0;\nmov.b32 %v" +
             std::to_string(4 * u + 2) + ", 0;\nmov.b32 %v" + std::to_string(4 * u + 3) + ", 0;\n";
        p += "add.s64 %rd4, %rd2, " + std::to_string(u * kReadThreads) + ";\nsetp.lt.u64 %p0, %rd4, %rd1;\n";
        p += "shl.b64 %rd5, %rd4, 4;\nadd.s64 %rd5, %rd0, %rd5;\n";
        p += "@%p0 ld.global.nc.v4.u32 {" + v + ", %v" + std::to_string(4 * u + 1) + ", %v" + std::to_string(4 * u + 2) +
             ", %v" + std::to_string(4 * u + 3) + "}, [%rd5];\n";
    }
    p += "mov.b32 %r2, 0;\n";
    for (int i = 0; i < 4 * kReadUnroll; i++) p += "xor.b32 %r2, %r2, %v" + std::to_string(i) + ";\n";
    p += "ld.param.u32 %r3, [never];\nsetp.ne.u32 %p1, %r2, %r3;\n@%p1 bra DONE;\n"
         "ld.param.u64 %rd6, [sink];\ncvta.to.global.u64 %rd6, %rd6;\nst.global.u32 [%rd6], %r2;\nDONE:\nret;\n}\n";
    return p;
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
        if (read_sink_) cudaFree(read_sink_);
        if (read_library_) cudaLibraryUnload(read_library_);
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
    void read(const void *src, size_t bytes) override {
        if (!read_kernel_) {
            const std::string ptx = read_anchor_ptx();
            check(cudaLibraryLoadData(&read_library_, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
                  "cudaLibraryLoadData (read anchor)");
            check(cudaLibraryGetKernel(&read_kernel_, read_library_, "schedx_read_anchor"), "cudaLibraryGetKernel");
            read_sink_ = alloc(4);
        }
        // Whole vectors: the slots are rounded up to 256 bytes, so the last partial one is inside.
        uint64_t vectors = (bytes + 15) / 16;
        uint32_t never = 0x5EEDF00Du;
        void *args[] = {&src, &vectors, &never, &read_sink_};
        const unsigned blocks = unsigned((vectors + kReadThreads * kReadUnroll - 1) / (kReadThreads * kReadUnroll));
        check(cudaLaunchKernel(reinterpret_cast<const void *>(read_kernel_), dim3(blocks), dim3(kReadThreads), args, 0,
                               nullptr),
              "read anchor launch");
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
    cudaLibrary_t read_library_ = nullptr;  // the read anchor, loaded on first use
    cudaKernel_t read_kernel_ = nullptr;
    void *read_sink_ = nullptr;
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
