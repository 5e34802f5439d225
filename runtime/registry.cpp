#include "registry.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <tuple>

#include "schedx/schedx.h"
#include "status.h"

namespace schedx {

std::string_view Variant::param(std::string_view key, std::string_view fallback) const {
    auto it = params.find(key);
    return it == params.end() ? fallback : std::string_view(it->second);
}

int Variant::param_int(std::string_view key, int fallback) const {
    const std::string_view text = param(key);
    int value = fallback;
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

int Variant::argument_index(const char *arg) const {
    for (int i = 0; i < metadata->num_arguments; i++) {
        if (std::strcmp(arg, metadata->arguments[i].name) == 0) return i;
    }
    return -1;
}

const halide_filter_argument_t *Variant::argument(const char *arg) const {
    const int i = argument_index(arg);
    return i < 0 ? nullptr : &metadata->arguments[i];
}

namespace {

// SCHEDX_JIT_MAX_REGISTERS="part=cap,part=cap": every variant whose name contains `part`
// is JIT-compiled with that register cap instead of its variants.json one, so that
// schedx-explore can time other caps without a rebuild (read once, at the first call).
std::vector<std::pair<std::string, int>> jit_cap_overrides() {
    std::vector<std::pair<std::string, int>> out;
    const char *env = std::getenv("SCHEDX_JIT_MAX_REGISTERS");
    std::istringstream items(env ? env : "");
    std::string item;
    while (std::getline(items, item, ',')) {
        const auto eq = item.find('=');
        if (eq == std::string::npos) continue;
        const int cap = std::atoi(item.c_str() + eq + 1);
        if (cap > 0) out.emplace_back(item.substr(0, eq), cap);
    }
    return out;
}

std::string join_params(const std::map<std::string, std::string, std::less<>> &params) {
    std::string out;
    for (const auto &[key, value] : params) out += (out.empty() ? "" : " ") + key + "=" + value;
    return out;
}

}  // namespace

const std::vector<Variant> &registry() {
    static const std::vector<Variant> variants = [] {
        std::vector<Variant> out;
        const auto overrides = jit_cap_overrides();
        for (size_t i = 0; i < kVariantCount; i++) {
            const VariantEntry &e = kVariantTable[i];
            Variant v{e.name, e.op, e.device, {}, e.params, e.argv, e.metadata()};
            std::istringstream words(e.params);
            std::string kv;
            while (words >> kv) {
                auto eq = kv.find('=');
                if (eq != std::string::npos) v.params[kv.substr(0, eq)] = kv.substr(eq + 1);
            }
            v.jit_max_registers = v.param_int("jit_max_registers", 0);
            v.min_sm = v.param_int("min_sm", 0);
            for (const auto &[part, cap] : overrides) {
                if (v.name.find(part) == std::string::npos) continue;
                v.jit_max_registers = cap;
                v.params["jit_max_registers"] = std::to_string(cap);
                v.params_text = join_params(v.params);  // what --list and the results show
            }
            out.push_back(std::move(v));
        }
        return out;
    }();
    return variants;
}

const std::vector<const Variant *> &candidates(const std::string &op, Device device, const std::string &key,
                                               const std::function<bool(const Variant &)> &serves) {
    static std::mutex mutex;
    static std::map<std::tuple<std::string, Device, std::string>, std::vector<const Variant *>> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] = cache.try_emplace({op, device, key});
    if (inserted) {
        for (const Variant &v : registry()) {
            if (v.op == op && v.device == device && serves(v)) it->second.push_back(&v);
        }
    }
    return it->second;  // map nodes never move, and entries are never erased
}

const Variant *find_variant(const std::string &name) {
    for (const Variant &v : registry()) {
        if (v.name == name) return &v;
    }
    return nullptr;
}

}  // namespace schedx

extern "C" int schedx_variant_count(void) { return static_cast<int>(schedx::kVariantCount); }

extern "C" schedx_status schedx_get_variant(int index, schedx_variant_info *info) {
    using namespace schedx;
    if (!info) return fail(SCHEDX_ERR_NULL_POINTER, "info is NULL");
    if (index < 0 || static_cast<size_t>(index) >= kVariantCount) {
        return fail(SCHEDX_ERR_UNKNOWN_VARIANT, "variant index " + std::to_string(index) + " out of range");
    }
    const Variant &v = registry()[index];
    *info = {v.name.c_str(), v.op.c_str(), v.device_name(), v.params_text.c_str()};
    return SCHEDX_OK;
}
