#include "ptx_rewrite.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <vector>

namespace schedx {
namespace {

// One schedx_ptx_* function: its 32-bit operands, its 32-bit result and the instruction
// body, with $d for the result register and $0, $1 for the operands (registers or
// immediates). The body sits in a { } scope of its own, so it may declare registers.
struct PtxFunction {
    const char *name;
    int operands;
    int min_sm;   // the .target it needs
    int min_ptx;  // the .version it needs, times 10
    const char *body;
    bool evict_first;  // also marks the global load that produced $0 (see ptx_evict_first)
    // 0..3 for the four parts of one mma (body: its opcode): calls of the same instruction
    // with the same operands in one basic block become one mma, whose four results the
    // calls read (Halide scalarizes vector-typed calls, so one result per call).
    int mma_part = -1;
};

// cvt.rn.satfinite.{e4m3,e5m2}x2.f32 d, a, b puts a's code in d's upper byte: the extern's
// first operand is the low byte. NaN gives 0x7F, as the integer encoder does.
constexpr PtxFunction kFunctions[] = {
    {"schedx_ptx_cvt_e4m3x2", 2, 89, 81,
     ".reg .b16 %schedx_h;\ncvt.rn.satfinite.e4m3x2.f32 %schedx_h, $1, $0;\ncvt.u32.u16 $d, %schedx_h;", false},
    {"schedx_ptx_cvt_e5m2x2", 2, 89, 81,
     ".reg .b16 %schedx_h;\ncvt.rn.satfinite.e5m2x2.f32 %schedx_h, $1, $0;\ncvt.u32.u16 $d, %schedx_h;", false},
    {"schedx_ptx_evict_first", 1, 80, 74, "mov.b32 $d, $0;", true},
    // D = A * B + C for a warp's 16 x 8 x 16 tile: operands a0..a3 (A's row-major fragment,
    // two bf16 / fp16 per word), b0, b1 (B's column-major fragment), c0..c3 (fp32 bits).
#define SCHEDX_MMA_PARTS(name, opcode) \
    {name "_d0", 10, 80, 70, opcode, false, 0}, {name "_d1", 10, 80, 70, opcode, false, 1}, \
        {name "_d2", 10, 80, 70, opcode, false, 2}, {name "_d3", 10, 80, 70, opcode, false, 3}
    SCHEDX_MMA_PARTS("schedx_ptx_mma_m16n8k16_bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    SCHEDX_MMA_PARTS("schedx_ptx_mma_m16n8k16_f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
#undef SCHEDX_MMA_PARTS
};

const PtxFunction *find_function(std::string_view name) {
    for (const PtxFunction &f : kFunctions) {
        if (name == f.name) return &f;
    }
    return nullptr;
}

constexpr std::string_view kPrefix = "schedx_ptx_";
constexpr std::string_view kEvictFirst = ".L1::no_allocate.L2::cache_hint";
constexpr std::string_view kPolicyDone = "createpolicy.fractional.L2::evict_first.b64 %schedx_policy, 1.0; ";

std::string_view trim(std::string_view s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// The smallest PTX version (times 10) that accepts .target sm_<sm>.
int ptx_version_for_target(int sm) {
    if (sm >= 90) return 78;
    if (sm >= 89) return 78;
    if (sm >= 87) return 74;
    if (sm >= 86) return 71;
    return 70;
}

std::string sm_text(int sm) { return "sm_" + std::to_string(sm); }

// The operands of an instruction line ("opcode a, b;" -> {"a", "b"}); a {..} vector
// operand stays one item.
std::vector<std::string_view> operands_of(std::string_view rest) {
    std::vector<std::string_view> out;
    if (!rest.empty() && rest.back() == ';') rest.remove_suffix(1);
    size_t start = 0;
    int depth = 0;
    for (size_t i = 0; i <= rest.size(); i++) {
        const char c = i < rest.size() ? rest[i] : ',';
        if (c == '{' || c == '[') depth++;
        if (c == '}' || c == ']') depth--;
        if (c == ',' && depth == 0) {
            out.push_back(trim(rest.substr(start, i - start)));
            start = i + 1;
        }
    }
    return out;
}

// An instruction line split into predicate-free opcode and operand text.
struct Instruction {
    std::string_view opcode, rest;
};
bool parse_instruction(std::string_view line, Instruction *ins) {
    line = trim(line);
    if (line.empty() || line[0] == '/' || line[0] == '.' || line[0] == '{' || line[0] == '}' || line[0] == '$') {
        return false;
    }
    if (line[0] == '@') {
        const auto sp = line.find_first_of(" \t");
        if (sp == std::string_view::npos) return false;
        line = trim(line.substr(sp));
    }
    const auto sp = line.find_first_of(" \t");
    ins->opcode = line.substr(0, sp);
    ins->rest = sp == std::string_view::npos ? std::string_view() : trim(line.substr(sp));
    return true;
}

// Whether an instruction writes `reg` (its first operand, or a {..} list there).
bool writes_register(const Instruction &ins, std::string_view reg) {
    static constexpr std::string_view no_dest[] = {"st.", "red.", "bar", "bra", "ret", "call", "membar", "fence",
                                                   "prefetch", "cp.async", "exit", "trap"};
    for (std::string_view p : no_dest) {
        if (starts_with(ins.opcode, p)) return false;
    }
    const auto ops = operands_of(ins.rest);
    if (ops.empty()) return false;
    std::string_view dest = ops[0];
    if (!dest.empty() && dest.front() == '{') dest = dest.substr(1, dest.size() - 2);
    size_t start = 0;
    for (size_t i = 0; i <= dest.size(); i++) {
        if (i == dest.size() || dest[i] == ',') {
            if (trim(dest.substr(start, i - start)) == reg) return true;
            start = i + 1;
        }
    }
    return false;
}

// A line's instruction; for a load that mark_evict_first wrapped with its policy, the load.
std::string_view instruction_of(std::string_view line) {
    const auto marked = line.find(kPolicyDone);
    if (marked == std::string_view::npos) return line;
    line = line.substr(marked + kPolicyDone.size());
    return line.substr(0, line.rfind('}'));
}

struct CallBlock {
    size_t first, last;  // line indices of "{ // callseq" and "} // callseq"
    const PtxFunction *fn;
    std::vector<std::string> operands;
    std::string result;
    int mma_group = -1;        // mma parts: the function's mma whose result this call reads
    bool opens_group = false;  // ... and this call issues it
};

// An mma issued in a function, which later calls of the same operands in its block reuse.
struct MmaGroup {
    const char *opcode;
    std::vector<std::string> operands;
    size_t last;  // last line of the latest call that reads it
    int id;
};

struct Rewriter {
    std::vector<std::string> lines;
    std::string error;
    int needed_sm = 0, needed_ptx = 0, calls = 0;

    bool fail(std::string message) {
        error = std::move(message);
        return false;
    }

    // Reads the call block that starts at line `first`; false with an error if it calls a
    // schedx_ptx_* function in a form the table cannot take; *is_schedx is false for other calls.
    bool read_call_block(size_t first, CallBlock *block, bool *is_schedx) {
        *is_schedx = false;
        std::string_view head = trim(lines[first]);
        const std::string_view tag = trim(head.substr(1));  // "// callseq N, 0"
        std::string end_tag = "} " + std::string(tag.substr(0, tag.find(',')));
        size_t last = first + 1;
        while (last < lines.size() && trim(lines[last]) != end_tag) last++;
        if (last == lines.size()) return true;  // not a call block this reader knows
        std::string_view callee;
        for (size_t i = first + 1; i < last; i++) {
            Instruction ins;
            if (parse_instruction(lines[i], &ins) && starts_with(ins.opcode, "call")) {
                const auto ops = operands_of(ins.rest);
                for (std::string_view op : ops) {
                    if (starts_with(op, kPrefix)) callee = op;
                }
            }
        }
        if (callee.empty()) return true;
        *is_schedx = true;
        const PtxFunction *fn = find_function(callee);
        if (!fn) return fail("the PTX calls " + std::string(callee) + ", which schedx's PTX rewrite does not know");
        block->first = first;
        block->last = last;
        block->fn = fn;
        block->operands.assign(fn->operands, std::string());
        for (size_t i = first + 1; i < last; i++) {
            std::string_view line = trim(lines[i]);
            Instruction ins;
            if (line.empty() || starts_with(line, ".param") || starts_with(line, "//")) continue;
            if (!parse_instruction(line, &ins)) return fail("unexpected line in the call block of " + std::string(callee) + ": " + std::string(line));
            const auto ops = operands_of(ins.rest);
            if (ins.opcode == "st.param.b32" || ins.opcode == "st.param.f32" || ins.opcode == "st.param.u32" ||
                ins.opcode == "st.param.s32") {
                // st.param.b32 [paramN], value;
                const std::string_view slot = ops.size() == 2 ? ops[0] : std::string_view();
                if (!starts_with(slot, "[param") || slot.back() != ']') {
                    return fail(std::string(callee) + ": unexpected operand store: " + std::string(line));
                }
                const int index = std::atoi(std::string(slot.substr(6, slot.size() - 7)).c_str());
                if (index < 0 || index >= fn->operands || slot.find('+') != std::string_view::npos) {
                    return fail(std::string(callee) + ": operand store out of range: " + std::string(line));
                }
                block->operands[index] = std::string(ops[1]);
            } else if (starts_with(ins.opcode, "st.param")) {
                return fail(std::string(callee) + " takes 32-bit scalar operands, not: " + std::string(line));
            } else if (starts_with(ins.opcode, "call")) {
                continue;
            } else if (ins.opcode == "ld.param.b32" || ins.opcode == "ld.param.u32" || ins.opcode == "ld.param.f32") {
                if (ops.size() != 2 || ops[1] != "[retval0]") {
                    return fail(std::string(callee) + ": unexpected result load: " + std::string(line));
                }
                block->result = std::string(ops[0]);
            } else {
                return fail(std::string(callee) + " returns a 32-bit scalar; unexpected: " + std::string(line));
            }
        }
        for (int i = 0; i < fn->operands; i++) {
            if (block->operands[i].empty()) {
                return fail(std::string(callee) + ": operand " + std::to_string(i) +
                            " is not stored (an undefined value reached the call)");
            }
        }
        if (block->result.empty()) return fail(std::string(callee) + ": its result is not read");
        return true;
    }

    // Marks the one global load in lines [begin, end) that writes `reg` as evict-first.
    bool mark_evict_first(size_t begin, size_t end, const std::string &reg) {
        if (reg.empty() || reg[0] != '%') {
            return fail("schedx_ptx_evict_first: its operand " + reg + " is not a register written by a load");
        }
        // The word's register, back through the moves and casts that split a wider load
        // (LLVM loads 16 bytes as ld.global.nc.v2.b64, then cvt.u32.u64 / mov.b64 {_, %r}).
        size_t def = end;
        Instruction ins;
        std::string from = reg;
        for (int step = 0; step < 4; step++) {
            def = end;
            for (size_t i = begin; i < end; i++) {
                Instruction at;
                if (!parse_instruction(instruction_of(lines[i]), &at) || !writes_register(at, from)) continue;
                if (def != end) return fail("schedx_ptx_evict_first: " + from + " is written more than once");
                def = i;
                ins = at;
            }
            if (def == end || starts_with(ins.opcode, "ld.global.")) break;
            const auto ops = operands_of(ins.rest);
            const bool moves = ins.opcode == "cvt.u32.u64" || ins.opcode == "mov.b64" || ins.opcode == "mov.b32" ||
                               ins.opcode == "mov.u32";
            if (!moves || ops.size() != 2 || ops[1].empty() || ops[1][0] != '%') break;
            from = std::string(ops[1]);
        }
        if (def == end || !starts_with(ins.opcode, "ld.global.")) {
            return fail("schedx_ptx_evict_first: " + reg + " does not come from a global load");
        }
        if (ins.opcode.find(kEvictFirst) != std::string_view::npos) return true;  // another lane of the load
        // ld.global[.nc][.vN].type: the hint goes after .global or .nc. ptxas takes
        // .L2::evict_first on a load only for 256-bit vectors, so the L2 priority comes from
        // an evict-first cache policy (createpolicy) in a scope around the load.
        std::string_view after = ins.opcode.substr(std::string_view("ld.global").size());
        const size_t insert_at = starts_with(after, ".nc") ? 3 : 0;
        std::string_view tail = after.substr(insert_at);
        const bool plain = starts_with(tail, ".v2.") || starts_with(tail, ".v4.") ||
                           (tail.size() >= 3 && (tail[1] == 'b' || tail[1] == 'u' || tail[1] == 's' || tail[1] == 'f') &&
                            tail.find('.', 1) == std::string_view::npos);
        std::string_view operands = ins.rest;
        if (!plain || operands.empty() || operands.back() != ';') {
            return fail("schedx_ptx_evict_first: the load of " + reg + " is not a plain ld.global: " + std::string(trim(lines[def])));
        }
        operands.remove_suffix(1);
        std::string_view head = lines[def];
        head = head.substr(0, head.find(ins.opcode));  // indentation and predicate
        const size_t indent = head.find_first_not_of(" \t");
        lines[def] = std::string(head.substr(0, indent)) + "{ .reg .b64 %schedx_policy; " +
                     "createpolicy.fractional.L2::evict_first.b64 %schedx_policy, 1.0; " +
                     std::string(indent == std::string_view::npos ? std::string_view() : head.substr(indent)) +
                     std::string(ins.opcode.substr(0, std::string_view("ld.global").size() + insert_at)) +
                     std::string(kEvictFirst) + std::string(tail) + " " + std::string(operands) + ", %schedx_policy; }";
        return true;
    }

    // Whether lines (from, to) stay in one basic block and leave `regs` unwritten.
    bool same_block_unwritten(size_t from, size_t to, const std::vector<std::string> &regs) {
        for (size_t i = from + 1; i < to; i++) {
            std::string_view line = trim(lines[i]);
            if (!line.empty() && line[0] == '$') return false;  // a label
            Instruction ins;
            if (!parse_instruction(instruction_of(lines[i]), &ins)) continue;
            if (starts_with(ins.opcode, "bra") || starts_with(ins.opcode, "ret") || starts_with(ins.opcode, "exit")) {
                return false;
            }
            for (const std::string &r : regs) {
                if (!r.empty() && r[0] == '%' && writes_register(ins, r)) return false;
            }
        }
        return true;
    }

    static std::string mma_register(int group, int part) {
        return "%schedx_mma" + std::to_string(4 * group + part);
    }

    std::vector<std::string> mma_lines(const CallBlock &b) {
        std::vector<std::string> out{"\t{ // rewritten: " + std::string(b.fn->name + kPrefix.size())};
        if (b.opens_group) {
            // mma takes registers only: immediates go through scoped ones.
            std::vector<std::string> ops = b.operands;
            out.push_back("\t.reg .b32 %schedx_i<10>;");
            for (size_t j = 0; j < ops.size(); j++) {
                if (ops[j][0] == '%') continue;
                out.push_back("\tmov.b32 %schedx_i" + std::to_string(j) + ", " + ops[j] + ";");
                ops[j] = "%schedx_i" + std::to_string(j);
            }
            std::string d;
            for (int part = 0; part < 4; part++) d += (part ? ", " : "") + mma_register(b.mma_group, part);
            out.push_back("\t" + std::string(b.fn->body) + " {" + d + "}, {" + ops[0] + ", " + ops[1] + ", " + ops[2] +
                          ", " + ops[3] + "}, {" + ops[4] + ", " + ops[5] + "}, {" + ops[6] + ", " + ops[7] + ", " +
                          ops[8] + ", " + ops[9] + "};");
        }
        out.push_back("\tmov.b32 " + b.result + ", " + mma_register(b.mma_group, b.fn->mma_part) + ";");
        out.push_back("\t}");
        return out;
    }

    std::vector<std::string> body_lines(const CallBlock &b) {
        if (b.fn->mma_part >= 0) return mma_lines(b);
        std::vector<std::string> out{"\t{ // rewritten: " + std::string(b.fn->name + kPrefix.size())};
        std::string_view body = b.fn->body;
        while (!body.empty()) {
            const auto nl = body.find('\n');
            std::string_view part = body.substr(0, nl);
            std::string line = "\t";
            for (size_t i = 0; i < part.size(); i++) {
                if (part[i] == '$' && i + 1 < part.size()) {
                    const char c = part[++i];
                    line += c == 'd' ? b.result : b.operands[c - '0'];
                } else {
                    line += part[i];
                }
            }
            out.push_back(line);
            body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
        }
        out.push_back("\t}");
        return out;
    }

    bool run() {
        // First the call blocks (marking the loads that evict_first names), then the copy.
        std::vector<CallBlock> blocks;
        size_t function_begin = 0, function_brace = 0;
        std::vector<MmaGroup> groups;             // the current function's
        std::map<size_t, int> mma_registers;      // a function's opening brace line -> its mma count
        for (size_t i = 0; i < lines.size(); i++) {
            std::string_view line = trim(lines[i]);
            if (starts_with(line, ".visible .entry") || starts_with(line, ".entry") ||
                starts_with(line, ".visible .func") || starts_with(line, ".func")) {
                function_begin = i;
                function_brace = i;
                while (function_brace < lines.size() && lines[function_brace] != "{") function_brace++;
                groups.clear();
            }
            if (!starts_with(line, "{ // callseq")) continue;
            CallBlock b;
            bool is_schedx = false;
            if (!read_call_block(i, &b, &is_schedx)) return false;
            if (!is_schedx) continue;
            if (b.fn->evict_first) {
                size_t function_end = i;
                while (function_end < lines.size() && lines[function_end] != "}") function_end++;
                if (!mark_evict_first(function_begin, function_end, b.operands[0])) return false;
            }
            if (b.fn->mma_part >= 0) {
                if (function_brace >= lines.size()) return fail("an mma call outside a function body");
                for (MmaGroup &g : groups) {
                    if (g.opcode == b.fn->body && g.operands == b.operands &&
                        same_block_unwritten(g.last, b.first, b.operands)) {
                        b.mma_group = g.id;
                        g.last = b.last;
                        break;
                    }
                }
                if (b.mma_group < 0) {
                    b.mma_group = int(groups.size());
                    b.opens_group = true;
                    groups.push_back({b.fn->body, b.operands, b.last, b.mma_group});
                    mma_registers[function_brace] = int(groups.size());
                }
            }
            needed_sm = std::max(needed_sm, b.fn->min_sm);
            needed_ptx = std::max(needed_ptx, b.fn->min_ptx);
            blocks.push_back(std::move(b));
            i = blocks.back().last;
        }
        std::vector<std::string> out;
        out.reserve(lines.size());
        auto next = blocks.begin();
        for (size_t i = 0; i < lines.size(); i++) {
            if (next != blocks.end() && i == next->first) {
                for (std::string &l : body_lines(*next)) out.push_back(std::move(l));
                i = next->last;
                ++next;
                calls++;
                continue;
            }
            std::string_view line = trim(lines[i]);
            if (starts_with(line, ".extern .func") && line.find(kPrefix) != std::string_view::npos) {
                while (i < lines.size() && trim(lines[i]) != ";") i++;  // the declaration ends at ";"
                continue;
            }
            out.push_back(std::move(lines[i]));
            const auto mma = mma_registers.find(i);
            if (mma != mma_registers.end()) {
                out.push_back("\t.reg .b32 %schedx_mma<" + std::to_string(4 * mma->second) + ">;");
            }
        }
        lines = std::move(out);
        return true;
    }
};

}  // namespace

bool ptx_has_schedx_calls(std::string_view ptx) { return ptx.find(kPrefix) != std::string_view::npos; }

int ptx_function_min_sm(std::string_view name) {
    const PtxFunction *f = find_function(name);
    return f ? f->min_sm : 0;
}

PtxRewrite rewrite_ptx_calls(std::string_view ptx, int device_sm) {
    PtxRewrite r;
    Rewriter w;
    for (size_t start = 0; start < ptx.size();) {
        const auto nl = ptx.find('\n', start);
        const size_t end = nl == std::string_view::npos ? ptx.size() : nl;
        w.lines.emplace_back(ptx.substr(start, end - start));
        start = end + 1;
    }
    if (!w.run()) {
        r.error = w.error;
        return r;
    }
    int version_line = -1, target_line = -1, version = 0, sm = 0;
    for (size_t i = 0; i < w.lines.size() && (version_line < 0 || target_line < 0); i++) {
        std::string_view line = trim(w.lines[i]);
        if (starts_with(line, ".version ")) {
            version_line = int(i);
            std::string_view v = trim(line.substr(9));
            const auto dot = v.find('.');
            version = 10 * std::atoi(std::string(v.substr(0, dot)).c_str()) +
                      (dot == std::string_view::npos ? 0 : std::atoi(std::string(v.substr(dot + 1)).c_str()));
        } else if (starts_with(line, ".target sm_")) {
            target_line = int(i);
            sm = std::atoi(std::string(line.substr(11)).c_str());
        }
    }
    if (version_line < 0 || target_line < 0 || version == 0 || sm == 0) {
        r.error = "the PTX has no .version or .target sm_ line";
        return r;
    }
    for (const std::string &line : w.lines) {
        if (line.find(kPrefix) != std::string::npos && !starts_with(trim(line), "//")) {
            r.error = "a call of a schedx_ptx_ function is left after the rewrite: " + std::string(trim(line));
            return r;
        }
    }
    const int target = std::max(sm, w.needed_sm);
    if (device_sm < target) {
        r.error = "the kernels need " + sm_text(target) + " (schedx_ptx_ instructions); this device is " +
                  sm_text(device_sm);
        return r;
    }
    version = std::max({version, w.needed_ptx, ptx_version_for_target(target)});
    w.lines[version_line] = ".version " + std::to_string(version / 10) + "." + std::to_string(version % 10);
    {
        std::string &t = w.lines[target_line];
        const size_t at = t.find("sm_") + 3;
        size_t digits = at;
        while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) digits++;
        t.replace(at, digits - at, std::to_string(target));
    }
    for (const std::string &line : w.lines) {
        r.ptx += line;
        r.ptx += '\n';
    }
    if (!ptx.empty() && ptx.back() != '\n') r.ptx.pop_back();
    r.ok = true;
    r.calls = w.calls;
    r.min_sm = target;
    return r;
}

}  // namespace schedx
