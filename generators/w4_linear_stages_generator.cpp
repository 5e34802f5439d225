// The stages of w4_linear's cuBLAS path for large M (w4_linear_generator.cpp has the operator):
//
// w4_dequantize writes dequantize(W) = (u - z) * s in x's dtype, [N][K], for cuBLAS's GEMM (on
// the CPU, schedx_w4_dequantize, for torch's GEMM through the torch op's large-M path): the
// product is exact in fp32 for integer z (a nibble difference of at most 5 bits times a 16-bit
// scale) and rounded once to x's dtype, as torchao's and gpt-fast's dequantize do; the fused
// kernels never round the weight. w4_epilogue adds the bias to the GEMM's fp32 result and
// rounds once; without bias the GEMM writes y in x's dtype itself.
#include "Halide.h"
#include "numerics.h"
#include "w4_linear_layout.h"

namespace {

using namespace Halide;
using schedx::ElemType;

enum class Words { cuda_words, cpu };
enum class General { cuda_general };

Expr decode(ElemType t, Expr bits) { return schedx::decode_to_float(cast<uint32_t>(bits), t); }

class W4Dequantize : public Generator<W4Dequantize> {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp16
    GeneratorParam<Words> sched{"schedule", Words::cuda_words, {{"cuda_words", Words::cuda_words}, {"cpu", Words::cpu}}};

    Input<Buffer<uint32_t, 2>> w{"w"};          // [N][K / 8] words of 8 nibbles
    Input<Buffer<uint16_t, 2>> scales{"scales"};  // [N][K / G]
    Input<Buffer<uint16_t, 2>> zeros{"zeros"};    // as scales; the scales where has_zeros is 0
    Input<int32_t> group_size{"group_size"};
    Input<int32_t> has_zeros{"has_zeros"};
    Output<Buffer<uint32_t, 2>> w_out{"w_out"};  // [N][K / 2] words of two elements in x's dtype

    void generate() {
        if (x_type == ElemType::fp32 || scale_type == ElemType::fp32) {
            throw std::invalid_argument("x_type and scale_type are bf16 or fp16");
        }
        // THE ALGORITHM
        // k counts output words: elements 2k and 2k + 1, nibbles 2(k % 4) and 2(k % 4) + 1 of W's word k / 4.
        const Expr G = 32 * (group_size / 32);  // whole vectors of 32, as the runtime checks
        Expr word = w(k / 4, n), g = 2 * k / G;
        Expr s = decode(scale_type, scales(g, n));
        Expr z = select(has_zeros != 0, decode(scale_type, zeros(g, n)), schedx::w4::kSymmetricZero);
        auto element = [&](Expr i) {
            Expr u = cast<float>((word >> cast<uint32_t>(4 * i)) & schedx::u32(0xF));
            return schedx::float_to_half_bits((u - z) * s, x_type);
        };
        w_out(k, n) = element(2 * (k % 4)) | (element(2 * (k % 4) + 1) << 16);

        // ESTIMATES
        w.set_estimates({{0, 1024}, {0, 8192}});
        scales.set_estimates({{0, 64}, {0, 8192}});
        zeros.set_estimates({{0, 64}, {0, 8192}});
        group_size.set_estimate(128);
        has_zeros.set_estimate(1);
        w_out.set_estimates({{0, 4096}, {0, 8192}});

        // THE SCHEDULE
        if (sched == Words::cpu) {
            schedule_cpu();
        } else {
            schedule_dequantize();
        }
    }

private:
    Var k{"k"}, n{"n"}, kv{"kv"}, ki{"ki"}, kb{"kb"}, kt{"kt"}, nb{"nb"}, ni{"ni"};

    // A thread per W word: one 4-byte load (a warp reads 128 contiguous bytes), its 8 elements
    // as one 16-byte store (a warp writes 512); 64 words along K by 2 rows per block. w_out
    // is the runtime's workspace, rows of K / 2 words from 0, 256-byte aligned. Not yet timed.
    void schedule_dequantize() {
        w_out.dim(0).set_min(0).set_extent(w.dim(0).extent() * 4);
        w_out.dim(1).set_min(0).set_stride((w_out.dim(1).stride() / 4) * 4);
        w_out.set_host_alignment(16);
        w_out.split(k, kv, ki, 4)
            .split(kv, kb, kt, 64, TailStrategy::GuardWithIf)
            .split(n, nb, ni, 2, TailStrategy::GuardWithIf)
            .reorder(ki, kt, ni, kb, nb)
            .vectorize(ki)
            .gpu_blocks(kb, nb)
            .gpu_threads(kt, ni);
    }

    // Rows in parallel; each group size its own specialization, so that the scale is not gathered
    // per lane, with 128 output words a vector at g = 128, 64 below (Halide computes a vector as 4
    // phases of nibble pairs). One Sapphire Rapids thread, 4096^2, best of 5: 2.7-4.0 / 3.0-4.0 /
    // 4.2-4.4 ms at g = 128 / 64 / 32 (128 words at every g: 3.2-4.0 / 5.3-6.1 / 5.1-6.0).
    // w_out is any caller's buffer: rows of at least K / 2 words from 0, no alignment.
    void schedule_cpu() {
        w_out.dim(0).set_min(0).set_extent(w.dim(0).extent() * 4);
        w_out.dim(1).set_min(0);
        w_out.parallel(n, 8, TailStrategy::GuardWithIf);
        for (int g : {32, 64, 128}) {
            w_out.specialize(group_size == g).split(k, kv, ki, g == 128 ? 128 : 64, TailStrategy::GuardWithIf).vectorize(ki);
        }
        w_out.specialize_fail("group_size is 32, 64 or 128");
    }
};

class W4Epilogue : public Generator<W4Epilogue> {
public:
    GeneratorParam<ElemType> x_type{"x_type", ElemType::bf16, schedx::elem_type_names()};      // bf16 | fp16
    GeneratorParam<ElemType> scale_type{"scale_type", ElemType::bf16, schedx::elem_type_names()};  // bf16 | fp16
    GeneratorParam<General> sched{"schedule", General::cuda_general, {{"cuda_general", General::cuda_general}}};

    Input<Buffer<float, 2>> acc{"acc"};       // [M][N], the GEMM's fp32 result
    Input<Buffer<uint16_t, 1>> bias{"bias"};  // [N] in the scales' dtype
    Output<Buffer<uint16_t, 2>> y{"y"};       // [M][N] in x's dtype

    void generate() {
        // THE ALGORITHM
        Expr b = decode(scale_type, bias(clamp(n, 0, bias.dim(0).extent() - 1)));
        y(n, m) = cast<uint16_t>(schedx::float_to_half_bits(acc(n, m) + b, x_type));

        // ESTIMATES
        acc.set_estimates({{0, 8192}, {0, 1024}});
        bias.set_estimates({{0, 8192}});
        y.set_estimates({{0, 8192}, {0, 1024}});

        // THE SCHEDULE
        // As w8_epilogue's: 128 x 2 outputs per block.
        y.gpu_tile(n, m, no, mo, ni, mi, 128, 2, TailStrategy::GuardWithIf);
    }

private:
    Var n{"n"}, m{"m"}, no{"no"}, mo{"mo"}, ni{"ni"}, mi{"mi"};
};

}  // namespace

HALIDE_REGISTER_GENERATOR(W4Dequantize, w4_dequantize)
HALIDE_REGISTER_GENERATOR(W4Epilogue, w4_epilogue)
