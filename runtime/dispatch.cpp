#include "dispatch.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "status.h"
#include "tuning_db.h"

namespace schedx {
namespace {

std::mutex forced_mutex;
std::map<std::string, std::string> forced;  // op -> variant name
std::atomic<uint64_t> forced_generation{0};  // bumped on every schedx_force_variant

// The last answers of choose_variant on this thread. The list pointer is held, so its
// address cannot be reused for another list while an entry names it.
struct Answer {
    RunnableList runnable;
    std::vector<int64_t> shape;
    uint64_t forced_generation = 0, db_generation = 0;
    const Variant *chosen = nullptr;
    std::string reason;
};
constexpr size_t kAnswers = 8;
thread_local std::array<Answer, kAnswers> answers;
thread_local size_t next_answer = 0;

thread_local std::map<std::string, DispatchTrace> last_choice;
// Calls of an op that ran outside schedx's kernels (schedx_record_outside_call): {path, reason}.
// An op's entry is in one of the two maps, whichever call came last.
thread_local std::map<std::string, std::pair<std::string, std::string>> last_outside;

}  // namespace

RunnableList runnable_variants(const std::vector<const Variant *> &candidates, const RunKey &key, int device_sm,
                               const std::function<bool(const Variant &)> &can_run,
                               const std::function<int(const Variant &)> &untuned_rank) {
    using List = std::vector<const Variant *>;
    static std::mutex mutex;
    static std::map<std::tuple<const void *, RunKey, int>, std::shared_ptr<const List>> cache;
    const auto cache_key = std::make_tuple(static_cast<const void *>(&candidates), key, device_sm);
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = cache.find(cache_key);
        if (it != cache.end()) return it->second;
    }
    auto runnable = std::make_shared<List>();
    for (const Variant *v : candidates) {
        if (v->min_sm <= device_sm || v->device != Device::cuda) {
            if (can_run(*v)) runnable->push_back(v);
        }
    }
    if (untuned_rank) {
        std::vector<std::pair<int, const Variant *>> ranked;
        for (const Variant *v : *runnable) ranked.emplace_back(untuned_rank(*v), v);
        std::stable_sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
        for (size_t i = 0; i < ranked.size(); i++) (*runnable)[i] = ranked[i].second;
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (cache.size() > 4096) cache.clear();  // a bound on memory for processes that see many shapes
    cache.emplace(cache_key, runnable);
    return runnable;
}

namespace {

schedx_status choose_uncached(const Workload &w, const std::vector<const Variant *> &candidates,
                              const std::vector<const Variant *> &runnable, const Variant **chosen, std::string *reason) {
    const std::string forced_name = forced_variant(w.op);
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
                            (is_candidate ? " cannot run this shape or alignment, or on this device"
                                          : " does not implement this device, dtype or output set"));
        }
        *reason = "forced";
        return SCHEDX_OK;
    }
    *chosen = tuning_db_best(w, runnable, reason);
    if (!*chosen) {
        if (runnable.empty()) return fail(SCHEDX_ERR_NO_VARIANT, "no built variant of " + w.op + " runs this call");
        *chosen = runnable.front();
        *reason = "heuristic (first runnable in variants.json order)";
    }
    return SCHEDX_OK;
}

}  // namespace

schedx_status choose_variant(const Workload &w, const std::vector<const Variant *> &candidates,
                             const RunnableList &runnable, const Variant **chosen) {
    const uint64_t forced_gen = forced_generation.load(std::memory_order_acquire);
    const uint64_t db_gen = tuning_db_generation();
    const Answer *answer = nullptr;
    for (const Answer &a : answers) {
        if (a.runnable == runnable && a.shape == w.shape && a.forced_generation == forced_gen &&
            a.db_generation == db_gen) {
            answer = &a;
            break;
        }
    }
    if (!answer) {
        Answer &a = answers[next_answer++ % kAnswers];
        schedx_status s = choose_uncached(w, candidates, *runnable, &a.chosen, &a.reason);
        if (s) {
            a.runnable.reset();
            return s;
        }
        a.runnable = runnable;
        a.shape = w.shape;
        a.forced_generation = forced_gen;
        a.db_generation = db_gen;
        answer = &a;
    }
    *chosen = answer->chosen;
    // Assigned member by member so a repeated call reuses the strings' storage.
    last_outside.erase(w.op);
    DispatchTrace &t = last_choice[w.op];
    t.workload = w;
    t.candidates = &candidates;
    t.runnable = runnable;
    t.chosen = answer->chosen;
    t.reason = answer->reason;
    return SCHEDX_OK;
}

const DispatchTrace *last_dispatch(const std::string &op) {
    auto it = last_choice.find(op);
    return it == last_choice.end() ? nullptr : &it->second;
}

}  // namespace schedx

namespace schedx {
std::string forced_variant(const std::string &op) {
    std::lock_guard<std::mutex> lock(forced_mutex);
    auto it = forced.find(op);
    return it == forced.end() ? std::string() : it->second;
}

int cpu_tile_rank(const Variant &v, int64_t m, int64_t k) {
    if (v.device != Device::cpu || v.param("tile").empty()) return 0;
    const int tile = v.param_int("tile", 0);
    return m < v.param_int("tile_rows", tile) || k < tile ? 1 : 0;
}

}  // namespace schedx

extern "C" schedx_status schedx_force_variant(const char *op, const char *variant) {
    using namespace schedx;
    if (!op) return fail(SCHEDX_ERR_NULL_POINTER, "op is NULL");
    bool op_known = false;
    for (const Variant &v : registry()) op_known |= v.op == op;
    if (!op_known) return fail(SCHEDX_ERR_UNKNOWN_VARIANT, std::string("unknown operator ") + op);
    std::lock_guard<std::mutex> lock(forced_mutex);
    forced_generation.fetch_add(1, std::memory_order_acq_rel);
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
    if (!op) return nullptr;
    if (auto it = schedx::last_outside.find(op); it != schedx::last_outside.end()) return it->second.first.c_str();
    const schedx::DispatchTrace *t = schedx::last_dispatch(op);
    return t ? t->chosen->name.c_str() : nullptr;
}

extern "C" const char *schedx_last_reason(const char *op) {
    if (!op) return nullptr;
    if (auto it = schedx::last_outside.find(op); it != schedx::last_outside.end()) return it->second.second.c_str();
    const schedx::DispatchTrace *t = schedx::last_dispatch(op);
    return t ? t->reason.c_str() : nullptr;
}

extern "C" schedx_status schedx_record_outside_call(const char *op, const char *path, const char *reason) {
    using namespace schedx;
    if (!op || !path || !reason) return fail(SCHEDX_ERR_NULL_POINTER, "op, path and reason are required");
    last_choice.erase(op);
    last_outside[op] = {path, reason};
    return SCHEDX_OK;
}

extern "C" const char *schedx_forced_variant(const char *op) {
    if (!op) return nullptr;
    // Per thread, as schedx_last_variant's: valid until this thread's next call.
    thread_local std::string name;
    name = schedx::forced_variant(op);
    return name.empty() ? nullptr : name.c_str();
}
