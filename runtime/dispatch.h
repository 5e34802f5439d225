// Picks the variant for a call: a forced variant name, else the fastest recorded one for
// the shape (tuning database), else the first runnable variant in variants.json order.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "registry.h"
#include "schedx/schedx.h"

namespace schedx {

// What the tuning database keys a measurement by.
struct Workload {
    std::string op;      // "cast_transpose"
    std::string dtypes;  // "bf16->e4m3", ...
    Device device;
    std::vector<int64_t> shape;  // operator-specific, e.g. {M, K}
};

// What the last successful call of an op on this thread dispatched: schedx-explore reads
// it to learn the workload key and the applicable variants exactly as dispatch sees them.
struct DispatchTrace {
    Workload workload;
    const std::vector<const Variant *> *candidates;  // registry-lifetime lists
    std::shared_ptr<const std::vector<const Variant *>> runnable;
    const Variant *chosen;
    std::string reason;
};
const DispatchTrace *last_dispatch(const std::string &op);

// The variants of `candidates` for which `can_run` holds, memoised under `key`, which
// must decide every can_run answer (shape, leading dimensions, alignment bits): checking
// each variant's parameters, and the bounds queries of autoscheduled ones, on every call
// was most of the host time of a small call.
// `untuned_rank` orders the untuned preference: variants of a lower rank go first, list order
// within a rank (later ranks for calls where a variant is known to lose; the tuning database
// still measures and may pick it). A predicate works as one: true is rank 1.
// Variants whose min_sm exceeds `device_sm` (the call's device; 0 on the CPU) are left
// out: on an older GPU their integer twins run.
// Shared, not copied: the list is read on every call.
using RunKey = std::array<int64_t, 12>;
using RunnableList = std::shared_ptr<const std::vector<const Variant *>>;
RunnableList runnable_variants(const std::vector<const Variant *> &candidates, const RunKey &key, int device_sm,
                               const std::function<bool(const Variant &)> &can_run,
                               const std::function<int(const Variant &)> &untuned_rank = nullptr);

// Untuned rank of a CPU variant tiled by `tile_rows` x `tile` (variants.json) for an M x K call:
// 1 below one whole tile, where its guarded tails run scalar and the untiled variant goes first
// (one thread, build machine: cast 64x64 68 us against 4.4, 256x256 184 against 112; quantize
// 64x64 111 against 55; the tiles win from 1024^2, cpu_compare_2026-12-06_build_machine_3c7e644.md), else 0.
int cpu_tile_rank(const Variant &v, int64_t m, int64_t k);

// `runnable` holds the variants that accept this call, in preference order (non-empty
// unless a forced variant cannot run). On success returns the choice and records it as
// this thread's last variant for the op. The answer is memoised per thread for the
// (runnable list, shape) until a variant is forced or the tuning database changes.
schedx_status choose_variant(const Workload &w, const std::vector<const Variant *> &candidates,
                             const RunnableList &runnable, const Variant **chosen);

// The variant schedx_force_variant set for `op`, or "" if none.
std::string forced_variant(const std::string &op);

}  // namespace schedx
