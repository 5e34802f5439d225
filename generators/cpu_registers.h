// The CPU targets' vector registers, stated once for every operator's register tiles: the
// generators refuse a tile past the widest target's, the runtime ranks a tile past the running
// build's (cpu_vector_registers: 16 AVX2, 32 AVX-512) last. Plain C++, no Halide.
#pragma once

namespace schedx {

// The widest CPU target's vector registers (AVX-512): no CPU register tile may need more.
constexpr int kCpuMaxVectorRegisters = 32;

}  // namespace schedx
