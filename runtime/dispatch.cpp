#include "dispatch.h"

#include <map>
#include <mutex>

#include "status.h"
#include "tuning_db.h"

namespace schedx {
namespace {

std::mutex forced_mutex;
std::map<std::string, std::string> forced;  // op -> variant name

thread_local std::map<std::string, DispatchTrace> last_choice;

}  // namespace

std::shared_ptr<const std::vector<const Variant *>> runnable_variants(
    const std::vector<const Variant *> &candidates, const RunKey &key, const std::function<bool(const Variant &)> &can_run) {
    using List = std::vector<const Variant *>;
    static std::mutex mutex;
    static std::map<std::pair<const void *, RunKey>, std::shared_ptr<const List>> cache;
    const auto cache_key = std::make_pair(static_cast<const void *>(&candidates), key);
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = cache.find(cache_key);
        if (it != cache.end()) return it->second;
    }
    auto runnable = std::make_shared<List>();
    for (const Variant *v : candidates) {
        if (can_run(*v)) runnable->push_back(v);
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() > 4096) cache.clear();  // a bound on memory for processes that see many shapes
    cache.emplace(cache_key, runnable);
    return runnable;
}

schedx_status choose_variant(const Workload &w, const std::vector<const Variant *> &candidates,
                             const std::vector<const Variant *> &runnable, const Variant **chosen) {
    std::string forced_name;
    {
        std::lock_guard<std::mutex> lock(forced_mutex);
        auto it = forced.find(w.op);
        if (it != forced.end()) forced_name = it->second;
    }
    std::string reason;
    *chosen = nullptr;
    if (!forced_name.empty()) {
        for (const Variant *v : runnable) {
            if (v->name == forced_name) *chosen = v;
        }
        if (!*chosen) {
            bool is_candidate = false;
            for (const Variant *v : candidates) is_candidate |= v->name == forced_name;
            return fail(SCHEDX_ERR_VARIANT_CANNOT_RUN,
                        "forced variant " + forced_name +
                            (is_candidate ? " cannot run this shape or alignment"
                                          : " does not implement this device, dtype or output set"));
        }
        reason = "forced";
    } else {
        *chosen = tuning_db_best(w, runnable, &reason);
        if (!*chosen) {
            if (runnable.empty()) return fail(SCHEDX_ERR_NO_VARIANT, "no built variant of " + w.op + " runs this call");
            *chosen = runnable.front();
            reason = "heuristic (first runnable in variants.json order)";
        }
    }
    // Assigned member by member so a repeated call reuses the vectors' storage.
    DispatchTrace &t = last_choice[w.op];
    t.workload = w;
    t.candidates = candidates;
    t.runnable = runnable;
    t.chosen = *chosen;
    t.reason = reason;
    return SCHEDX_OK;
}

const DispatchTrace *last_dispatch(const std::string &op) {
    auto it = last_choice.find(op);
    return it == last_choice.end() ? nullptr : &it->second;
}

}  // namespace schedx

extern "C" schedx_status schedx_force_variant(const char *op, const char *variant) {
    using namespace schedx;
    if (!op) return fail(SCHEDX_ERR_NULL_POINTER, "op is NULL");
    bool op_known = false;
    for (const Variant &v : registry()) op_known |= v.op == op;
    if (!op_known) return fail(SCHEDX_ERR_UNKNOWN_VARIANT, std::string("unknown operator ") + op);
    std::lock_guard<std::mutex> lock(forced_mutex);
    if (!variant || !*variant) {
        forced.erase(op);
        return SCHEDX_OK;
    }
    const Variant *v = find_variant(variant);
    if (!v || v->op != op) {
        return fail(SCHEDX_ERR_UNKNOWN_VARIANT, std::string("no variant named ") + variant + " for " + op);
    }
    forced[op] = variant;
    return SCHEDX_OK;
}

extern "C" const char *schedx_last_variant(const char *op) {
    const schedx::DispatchTrace *t = op ? schedx::last_dispatch(op) : nullptr;
    return t ? t->chosen->name.c_str() : nullptr;
}

extern "C" const char *schedx_last_reason(const char *op) {
    const schedx::DispatchTrace *t = op ? schedx::last_dispatch(op) : nullptr;
    return t ? t->reason.c_str() : nullptr;
}
