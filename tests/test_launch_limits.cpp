// Every CUDA variant's kernel launches against cuLaunchKernel's limits, read from the lowered
// statements the build writes (no GPU here). A launch past them fails with
// CUDA_ERROR_INVALID_VALUE only on the GPU and only at the shapes that cross them: the
// quantize two-pass first pass had M threads per block and passed the GPU tests up to M = 1024.
#include <doctest/doctest.h>

#include <map>
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

TEST_CASE("CUDA launches: constant threads per block within 1024, shared memory within the opt-in limit where it is constant") {
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
            // A launch gets 48 KiB of dynamic shared memory; schedx's launch wrapper opts in above
            // that, up to 99 KiB on every device from sm_80 (sm_86 / sm_89's maximum), so only
            // variants that need sm_80 may. Some general variants size theirs per call (-1 here).
            const long shared = constant_of(l.dims[6]);
            CHECK(shared <= (v.min_sm >= 80 ? 99 : 48) * 1024);
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

namespace {

// The setp comparisons ("a b") that predicate register `p` of `kernel` is built from through
// and.pred / or.pred.
void guard_leaves(const std::string &kernel, const std::string &p, std::vector<std::string> &out, int depth = 0) {
    std::smatch m;
    if (depth > 16) return;
    if (std::regex_search(kernel, m, std::regex(R"((?:and|or)\.pred\s+)" + p + R"(,\s*(%p\d+),\s*(%p\d+);)"))) {
        const std::string a = m[1], b = m[2];
        guard_leaves(kernel, a, out, depth + 1);
        guard_leaves(kernel, b, out, depth + 1);
    } else if (std::regex_search(kernel, m, std::regex(R"(setp\.\w+\.\w+\s+)" + p + R"(,\s*([^,]+),\s*([^;]+);)"))) {
        out.push_back(m[1].str() + " " + m[2].str());
    }
}

}  // namespace

// redux.sync with a full member mask needs all 32 lanes of the warp to execute it. A stage
// guarded by tid.x < 8 in a block 32 lanes wide leaves 24 of them out: cols_io=element with the
// fused amax did, and its forced test stopped on the GPU. So the guard of every block holding
// one may compare tid.x only with multiples of 32, and tid.y or tid.z only where the block is
// whole warps wide.
TEST_CASE("CUDA kernels run each warp-wide reduction on whole warps") {
    int checked = 0;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.device != schedx::Device::cuda) continue;
        const std::string text = test::stmt_text(v);
        const std::vector<Launch> launches = launches_in(text);
        for (size_t at = text.find(".entry"); at != std::string::npos;) {
            const size_t next = text.find(".entry", at + 1);
            const std::string kernel = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
            at = next;
            std::smatch m;
            if (kernel.find("redux.sync") == std::string::npos ||
                !std::regex_search(kernel, m, std::regex(R"(\.entry\s+(\w+)\()"))) {
                continue;
            }
            const std::string name = m[1];
            CAPTURE(v.name);
            CAPTURE(name);
            long threads_x = -1;
            for (const Launch &l : launches) {
                if (l.kernel.find(name) != std::string::npos) threads_x = constant_of(l.dims[3]);
            }
            REQUIRE(threads_x > 0);
            std::map<std::string, char> tid;  // register -> 'x', 'y' or 'z'
            const std::regex tid_reg(R"(mov\.u32\s+(%r\d+),\s*%tid\.([xyz]);)");
            for (auto t = std::sregex_iterator(kernel.begin(), kernel.end(), tid_reg); t != std::sregex_iterator(); ++t) {
                tid[(*t)[1].str()] = (*t)[2].str()[0];
            }
            for (size_t r = kernel.find("redux.sync"); r != std::string::npos; r = kernel.find("redux.sync", r + 1)) {
                const size_t label_at = kernel.rfind("\n$L__BB", r);
                if (label_at == std::string::npos) continue;  // the entry block: no guard
                const std::string label = kernel.substr(label_at + 1, kernel.find(':', label_at) - label_at - 1);
                std::vector<std::string> leaves;
                const std::string branch = "bra \t" + label + ";";
                const size_t b = kernel.find(branch);
                if (b != std::string::npos) {
                    const std::string line = kernel.substr(kernel.rfind('\n', b), b - kernel.rfind('\n', b));
                    if (std::regex_search(line, m, std::regex(R"(@(%p\d+))"))) guard_leaves(kernel, m[1], leaves);
                }
                for (const std::string &leaf : leaves) {
                    CAPTURE(leaf);
                    const std::string reg = leaf.substr(0, leaf.find(' '));
                    const long bound = constant_of(leaf.substr(leaf.find(' ') + 1));
                    if (!tid.count(reg) || bound < 0) continue;
                    CHECK((tid[reg] == 'x' ? bound % 32 == 0 : threads_x % 32 == 0));
                }
            }
            checked++;
        }
    }
    CHECK(checked >= 30);
}
