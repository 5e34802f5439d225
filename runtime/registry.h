// The variant registry: one row per entry of schedules/variants.json (generated into
// variant_table.cpp), with its schedule parameters and the Halide metadata of its
// arguments. A variant is called through its argv entry point, so the registry needs no
// per-variant code.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "HalideRuntime.h"

namespace schedx {

enum class Device { cpu, cuda };

struct VariantEntry {
    const char *name;
    const char *op;
    Device device;
    const char *params;  // "key=value key=value", as given to the generator
    int (*argv)(void **);
    const halide_filter_metadata_t *(*metadata)();
};
extern const VariantEntry kVariantTable[];
extern const size_t kVariantCount;

struct Variant {
    std::string name, op;
    Device device;
    std::map<std::string, std::string, std::less<>> params;
    std::string params_text;  // params as "key=value key=value", for schedx_get_variant
    int (*argv)(void **);
    const halide_filter_metadata_t *metadata;
    // CUDA: the register cap its kernels are JIT-compiled with (variants.json's
    // jit_max_registers; 0: Halide's default of 64).
    int jit_max_registers = 0;
    // CUDA: the compute capability (10 * major + minor) its kernels need (variants.json's
    // min_sm, for instructions the runtime's PTX rewrite adds; 0: any device Halide targets).
    int min_sm = 0;

    // Views, not copies: eligibility checks read parameters on every call.
    std::string_view param(std::string_view key, std::string_view fallback = {}) const;
    int param_int(std::string_view key, int fallback) const;
    // The index of argument `arg` in the pipeline's argv, or -1 if it has none.
    int argument_index(const char *arg) const;
    // The argument `arg`, or nullptr if the pipeline has no such argument.
    const halide_filter_argument_t *argument(const char *arg) const;
    const char *device_name() const { return device == Device::cuda ? "cuda" : "cpu"; }
};

// Every built variant, in variants.json order (the default preference order).
const std::vector<Variant> &registry();
const Variant *find_variant(const std::string &name);

// The variants of `op` on `device` that `serves` accepts, in registry order, cached under
// `key` (which must decide the filter's answer): re-reading every variant's parameters
// on each call was half the host time of a small call.
const std::vector<const Variant *> &candidates(const std::string &op, Device device, const std::string &key,
                                               const std::function<bool(const Variant &)> &serves);

}  // namespace schedx
