// Every CUDA variant's kernel launches against cuLaunchKernel's limits, read from the lowered
// statements the build writes (no GPU here). A launch past them fails with
// CUDA_ERROR_INVALID_VALUE only on the GPU and only at the shapes that cross them: the
// quantize two-pass first pass had M threads per block and passed the GPU tests up to M = 1024.
#include <doctest/doctest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "registry.h"
#include "stmt_text.h"

namespace {

// One halide_cuda_run call: the kernel's name, then grid x, y, z, threads x, y, z and dynamic
// shared bytes as printed (a constant, or an expression of the buffers' shapes).
struct Launch {
    std::string kernel;
    std::vector<std::string> dims;
};

std::vector<Launch> launches_in(const std::string &text) {
    const std::string call = "halide_cuda_run(";
    std::vector<Launch> out;
    for (size_t at = text.find(call); at != std::string::npos; at = text.find(call, at + 1)) {
        // The top-level arguments: the context, the kernel's name, then the launch's seven.
        std::vector<std::string> args(1);
        int depth = 0;
        for (size_t i = at + call.size(); i < text.size() && args.size() <= 9; i++) {
            const char ch = text[i];
            if (ch == ',' && depth == 0) {
                args.emplace_back();
                continue;
            }
            depth += ch == '(' ? 1 : (ch == ')' ? -1 : 0);
            if (depth < 0) break;
            if (ch != ' ' || !args.back().empty()) args.back() += ch;
        }
        if (args.size() < 9) continue;
        out.push_back({args[1], std::vector<std::string>(args.begin() + 2, args.begin() + 9)});
    }
    return out;
}

// A printed launch argument's value when it is a constant ("256", "0 + (8224*4)"), else -1.
long constant_of(const std::string &e) {
    std::smatch m;
    if (std::regex_match(e, m, std::regex(R"((\d+))"))) return std::stol(m[1]);
    if (std::regex_match(e, m, std::regex(R"(0 \+ \((\d+)\*(\d+)\))"))) return std::stol(m[1]) * std::stol(m[2]);
    return -1;
}

}  // namespace

TEST_CASE("CUDA launches: constant threads per block within 1024, shared memory within 48 KiB where it is constant") {
    std::set<std::string> ops;
    int checked = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda) continue;
        CAPTURE(v.name);
        const std::vector<Launch> launches = launches_in(test::stmt_text(v));
        REQUIRE(!launches.empty());
        for (const Launch &l : launches) {
            CAPTURE(l.kernel);
            CAPTURE(l.dims[3]);
            CAPTURE(l.dims[6]);
            const long tx = constant_of(l.dims[3]), ty = constant_of(l.dims[4]), tz = constant_of(l.dims[5]);
            CHECK((tx > 0 && ty > 0 && tz > 0));
            CHECK(tx * ty * tz <= 1024);
            // Halide's runtime asks for no more than the default 48 KiB of dynamic shared memory.
            // Some general variants size theirs per call (-1 here); the rest must fit.
            const long shared = constant_of(l.dims[6]);
            CHECK(shared <= 48 * 1024);
            // The quantize first pass: constant shared memory, strips along the grid's x (any M).
            if (v.param("axis_pass") == "first") {
                CHECK(shared >= 0);
                CHECK(l.dims[1] == "1");
                CHECK(l.dims[2] == "1");
            }
        }
        ops.insert(v.op);
        checked++;
    }
    CHECK(ops.count("cast_transpose"));
    CHECK(ops.count("w8_linear"));
    CHECK(ops.count("abs_max"));
    CHECK(ops.count("quantize_fp8"));
    CHECK(checked >= 200);
}

// quantize_fp8's CUDA kernels scale by one mul.f32 and rely on the PTX keeping subnormal
// operands and products (no .ftz), as TE and torch do; Halide asks for flushing
// (nvptx-f32ftz) but 21 emits none. A Halide that did would fail here, not on the GPU.
TEST_CASE("CUDA kernels' PTX holds no flush-to-zero instruction") {
    int checked = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda) continue;
        CAPTURE(v.name);
        const std::string text = test::stmt_text(v);
        REQUIRE(text.find(".version") != std::string::npos);  // the PTX is in the statement
        CHECK(text.find(".ftz") == std::string::npos);
        checked++;
    }
    CHECK(checked >= 200);
}

// redux.sync with a full member mask needs all 32 lanes of the warp to execute it. A kernel
// whose stages run on fewer threads than the block (a stage guarded by tid.x < 8 in a block
// 32 wide) would leave lanes out: cols_io=element with the fused amax did, and its forced
// test stopped on the GPU. So a kernel holding one compares no thread index with a constant.
TEST_CASE("CUDA kernels with a warp-wide reduction guard no lanes out of it") {
    const std::regex tid_reg(R"(mov\.u32\s+(%r\d+),\s*%tid\.[xyz];)");
    int checked = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda) continue;
        const std::string text = test::stmt_text(v);
        size_t at = text.find(".entry");
        while (at != std::string::npos) {
            const size_t next = text.find(".entry", at + 1);
            const std::string kernel = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
            at = next;
            if (kernel.find("redux.sync") == std::string::npos) continue;
            CAPTURE(v.name);
            for (auto m = std::sregex_iterator(kernel.begin(), kernel.end(), tid_reg); m != std::sregex_iterator(); ++m) {
                const std::string reg = (*m)[1].str();
                CAPTURE(reg);
                const std::regex guard(R"(setp\.\w+\.[us]32\s+%p\d+,\s*)" + reg + R"(,\s*\d+;)");
                CHECK(!std::regex_search(kernel, guard));
            }
            checked++;
        }
    }
    CHECK(checked >= 30);
}
