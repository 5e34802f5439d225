// schedx-int8-gemm: cuBLAS's int8 GEMM alone (int8 x int8 -> int32, tensor cores), as the
// w8_linear planes path calls it: W [N][K] int8 as stored, 3M rows of int8 digit planes,
// int32 out. Timed by schedx-explore's own code (tools/explore/measure.h), so its numbers
// sit next to the planes path's whole-call times: the difference is the planes kernel, the
// epilogue and the launches.
// Usage: schedx-int8-gemm [--dirty-cache] [N,K] [rows,rows,...]   (default 8192,8192 and
// 3,6,12,24,48,96,192 plane rows)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "measure.h"

namespace {

std::vector<long> numbers(const std::string &list) {
    std::vector<long> out;
    std::stringstream s(list);
    for (std::string item; std::getline(s, item, ',');) out.push_back(std::stol(item));
    return out;
}

}  // namespace

int main(int argc, char **argv) {
    bool dirty_cache = false;
    std::vector<std::string> lists;
    for (int i = 1; i < argc; i++) {
        if (std::string(argv[i]) == "--dirty-cache") dirty_cache = true;
        else lists.push_back(argv[i]);
    }
    const std::vector<long> nk = numbers(lists.size() > 0 ? lists[0] : "8192,8192");
    const std::vector<long> plane_rows = numbers(lists.size() > 1 ? lists[1] : "3,6,12,24,48,96,192");
    if (nk.size() != 2) {
        std::fprintf(stderr, "usage: schedx-int8-gemm [--dirty-cache] [N,K] [rows,rows,...]\n");
        return 2;
    }
    const long n = nk[0], k = nk[1];
    std::string why;
    const std::unique_ptr<explore::Backend> b = explore::make_cuda_backend(&why);
    if (!b) {
        std::fprintf(stderr, "schedx-int8-gemm: %s\n", why.c_str());
        return 1;
    }
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "schedx-int8-gemm: cublasCreate failed\n");
        return 1;
    }
    const explore::Timing timing{7, dirty_cache};
    const size_t w_bytes = size_t(n) * size_t(k);
    const int sets = explore::rotation_sets(*b, w_bytes);
    explore::Pool w(*b, w_bytes, sets);
    b->fill(w.at(0), 3, w.slot_bytes() * size_t(sets));  // int8 3: never time on zeros
    std::printf("# cuBLAS int8 GEMM (W as stored x int8 planes -> int32), %s, N = %ld, K = %ld\n\n", b->name().c_str(),
                n, k);
    std::printf("Timed as schedx-explore%s times variants (tools/explore/measure.h), W rotated over %d buffers.\n\n",
                dirty_cache ? " --dirty-cache" : "", sets);
    std::printf("| plane rows (3M) | us | W GB/s |\n|---|---|---|\n");
    for (long rows : plane_rows) {
        void *planes = b->alloc(size_t(rows) * size_t(k)), *out = b->alloc(size_t(rows) * size_t(n) * 4);
        b->fill(planes, 1, size_t(rows) * size_t(k));
        const int32_t alpha = 1, beta = 0;
        cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
        auto gemm = [&](int s) {
            // Column-major: out^T [n x rows] = W^T [n x k] * planes^T [k x rows].
            const cublasStatus_t r = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(rows), int(k), &alpha,
                                                  w.at(s), CUDA_R_8I, int(k), planes, CUDA_R_8I, int(k), &beta, out,
                                                  CUDA_R_32I, int(n), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
            if (r != CUBLAS_STATUS_SUCCESS) status = r;
        };
        const explore::Measurement t = explore::measure(*b, gemm, sets, timing);
        int32_t first = 0;
        b->download(&first, out, 4);
        if (status != CUBLAS_STATUS_SUCCESS || first != 3 * k) {
            std::fprintf(stderr, "schedx-int8-gemm: %ld rows: status %d, out[0] = %d (want %ld)\n", rows, int(status),
                         first, 3 * k);
            return 1;
        }
        std::printf("| %ld | %.2f | %.0f |\n", rows, t.median_us, double(w_bytes) / t.median_us / 1e3);
        b->release(planes);
        b->release(out);
    }
    cublasDestroy(handle);
    return 0;
}
