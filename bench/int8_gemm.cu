// schedx-int8-gemm: cuBLAS's int8 GEMM alone (int8 x int8 -> int32, tensor cores), as the
// w8_linear planes path calls it: W [N][K] int8 as stored, 3M rows of int8 digit planes,
// int32 out. Timed by schedx-explore's own code (tools/explore/measure.h), so its numbers
// sit next to the planes path's whole-call times: the difference is the planes kernel, the
// epilogue and the launches.
// --lt: also every algorithm cuBLASLt's heuristic offers for the same GEMM (tile, split-K,
// stages), each timed the same way: whether a pick other than cublasGemmEx's reads W faster.
// Usage: schedx-int8-gemm [--dirty-cache] [--lt] [--nk N,K] [--rows r,r,...]   (default
// 8192,8192 and 3,6,12,24,48,96,192 plane rows)
#include <CLI/CLI.hpp>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "measure.h"

namespace {

// Times every algorithm cuBLASLt's heuristic returns for out^T [n x rows] = W^T * planes^T
// (column-major, as cublasGemmEx is called): table rows, fastest first, each naming its
// configuration.
std::vector<std::string> sweep_lt(explore::Backend &b, explore::Pool &w, int sets, const explore::Timing &timing, long n, long k, long rows,
              const void *planes, void *out) {
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32I, CUDA_R_32I);
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8I, uint64_t(k), uint64_t(n), k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8I, uint64_t(k), uint64_t(rows), k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32I, uint64_t(n), uint64_t(rows), n);
    const size_t ws_bytes = size_t(64) << 20;
    void *ws = b.alloc(ws_bytes);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    cublasLtMatmulHeuristicResult_t found[32];
    int count = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 32, found, &count);
    std::vector<std::pair<double, std::string>> lines;
    const int32_t alpha = 1, beta = 0;
    for (int i = 0; i < count; i++) {
        cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
        auto gemm = [&](int s) {
            const cublasStatus_t r = cublasLtMatmul(lt, desc, &alpha, w.at(s), la, planes, lb, &beta, out, lc, out, lc,
                                                    &found[i].algo, ws, ws_bytes, nullptr);
            if (r != CUBLAS_STATUS_SUCCESS) status = r;
        };
        const explore::Measurement t = explore::measure(b, gemm, sets, timing);
        int32_t first = 0;
        b.download(&first, out, 4);
        auto config = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
            uint32_t v = 0;  // every attribute read here fits 32 bits
            size_t written = 0;
            cublasLtMatmulAlgoConfigGetAttribute(&found[i].algo, attr, &v, sizeof v, &written);
            return v;
        };
        char line[256];
        std::snprintf(line, sizeof line, "| %ld | %d | %u | %u | %u | %u | %zu | %s | %.2f | %.0f |", rows, i,
                      config(CUBLASLT_ALGO_CONFIG_ID), config(CUBLASLT_ALGO_CONFIG_TILE_ID),
                      config(CUBLASLT_ALGO_CONFIG_STAGES_ID), config(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                      found[i].workspaceSize, status == CUBLAS_STATUS_SUCCESS && first == 3 * k ? "ok" : "WRONG",
                      t.median_us, double(size_t(n) * size_t(k)) / t.median_us / 1e3);
        lines.emplace_back(t.median_us, line);
    }
    std::sort(lines.begin(), lines.end());
    std::vector<std::string> rows_out;
    for (const auto &l : lines) rows_out.push_back(l.second);
    b.release(ws);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(lt);
    return rows_out;
}

}  // namespace

int main(int argc, char **argv) {
    bool dirty_cache = false, lt = false;
    std::vector<long> nk = {8192, 8192}, plane_rows = {3, 6, 12, 24, 48, 96, 192};
    CLI::App app{"cuBLAS's int8 GEMM alone, as the w8_linear planes path calls it, timed as schedx-explore times "
                 "variants."};
    app.add_option("--nk", nk, "N,K of W")->delimiter(',')->expected(2)->check(CLI::Range(1, 1 << 20));
    app.add_option("--rows", plane_rows, "plane rows (3M) to time, e.g. 3,6,12")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20));
    app.add_flag("--dirty-cache", dirty_cache, "time each call alone after dirtying L2, as do_bench does");
    app.add_flag("--lt", lt, "also every algorithm cuBLASLt's heuristic offers");
    CLI11_PARSE(app, argc, argv);
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
    std::vector<std::string> lt_rows;
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
        if (lt) {
            for (std::string &row : sweep_lt(*b, w, sets, timing, n, k, rows, planes, out)) lt_rows.push_back(row);
        }
        b->release(planes);
        b->release(out);
    }
    if (lt) {
        std::printf("\ncuBLASLt's heuristic algorithms, fastest first per row count:\n\n"
                    "| plane rows | heuristic rank | algo id | tile id | stages id | split-K | workspace | check | us | W GB/s |\n"
                    "|---|---|---|---|---|---|---|---|---|---|\n");
        for (const std::string &row : lt_rows) std::printf("%s\n", row.c_str());
    }
    cublasDestroy(handle);
    return 0;
}
