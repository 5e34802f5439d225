// Fuzzes the tuning-database reader with arbitrary file contents: the file is written,
// then looked up as dispatch would for a few workloads. Must never crash, and an answer
// must be one of the variants offered. "@CPU@" and "@LIB@" in the input stand for this
// machine's CPU stamp and the library version, so the seed corpus's records match on any
// machine and the lookup logic past the stamp checks is reached.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tuning_db.h"

namespace {

std::string substitute(std::string text, const std::string &from, const std::string &to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
    return text;
}

std::vector<const schedx::Variant *> cpu_variants(const std::string &op) {
    std::vector<const schedx::Variant *> out;
    for (const schedx::Variant &v : schedx::registry()) {
        if (v.op == op && v.device == schedx::Device::cpu) out.push_back(&v);
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const std::string dir = [] {
        char name[] = "/tmp/schedx_fuzz_db_XXXXXX";
        if (!mkdtemp(name)) std::abort();
        return std::string(name);
    }();
    // Two names in turn: a new path always re-reads, whatever the file's size and mtime.
    static int turn = 0;
    const std::string path = dir + (turn++ % 2 ? "/a.jsonl" : "/b.jsonl");
    std::string text(reinterpret_cast<const char *>(data), size);
    text = substitute(text, "@CPU@", schedx::device_stamp(schedx::Device::cpu).device_name);
    text = substitute(text, "@LIB@", schedx::library_version());
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    setenv("SCHEDX_TUNING_DB", path.c_str(), 1);

    static const std::vector<const schedx::Variant *> ct = cpu_variants("cast_transpose"), w8 = cpu_variants("w8_linear");
    static const std::vector<std::vector<int64_t>> shapes2{{64, 64}, {100, 48}, {1, 1}, {INT32_MAX, 1}};
    static const std::vector<std::vector<int64_t>> shapes3{{1, 4096, 4096}, {16, 64, 128}, {3, 5, 7}};
    for (const auto &shape : shapes2) {
        const schedx::Workload w{"cast_transpose", "bf16->e4m3fn:both+amax", schedx::Device::cpu, shape};
        std::string reason;
        const schedx::Variant *v = schedx::tuning_db_best(w, ct, &reason);
        if (v && (std::find(ct.begin(), ct.end(), v) == ct.end() || reason.empty())) std::abort();
    }
    for (const auto &shape : shapes3) {
        const schedx::Workload w{"w8_linear", "bf16*int8*bf16->bf16", schedx::Device::cpu, shape};
        std::string reason;
        const std::vector<const schedx::Variant *> one{w8.front()};
        const schedx::Variant *v = schedx::tuning_db_best(w, one, &reason);
        if (v && (v != w8.front() || reason.empty())) std::abort();
    }
    return 0;
}
