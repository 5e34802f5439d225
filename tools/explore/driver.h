// One operator's part in schedx-explore: its buffers for a shape, one call, the check
// against an independent reference and the bytes a call must move. main.cpp does the
// rest (variants, timing, tables, database) the same way for every operator.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"

namespace explore {

// An operator call at one shape with its buffers allocated: `sets` copies of every
// argument, rotated through while timing.
class Instance {
public:
    virtual ~Instance() = default;
    virtual int sets() const = 0;
    // Bytes read + written by one call: the least any schedule must move.
    virtual uint64_t bytes_moved() const = 0;
    // One call on buffer set `set`, queued on the device (the dispatcher picks the variant,
    // or the forced one runs).
    virtual schedx_status run(int set) = 0;
    // Poisons set 0's outputs, runs it and compares with the reference: "" or the first
    // mismatch. Throws std::runtime_error when the device fails.
    virtual std::string check() = 0;
    // For operators that only read (OpDriver::read_only): set `set`'s input, bytes_moved()
    // bytes, which the read-only anchor reads.
    virtual const void *read_only_input(int) const { return nullptr; }
};

struct OpDriver {
    std::string op;                    // the registry's operator name
    std::string shape_dims;            // how a shape is written, e.g. "MxK"
    std::vector<std::string> configs;  // argument variations explored, e.g. "bf16", "bf16+amax"
    std::vector<std::vector<int64_t>> cpu_shapes, cuda_shapes;  // defaults per device
    // --ragged (issue 29): sizes off the tiles and steps, each beside an aligned neighbour,
    // so that time per byte against that neighbour shows what raggedness costs.
    std::vector<std::vector<int64_t>> ragged_shapes;
    std::function<std::unique_ptr<Instance>(Backend &, const std::string &config, const std::vector<int64_t> &shape)>
        make;
    // The ceiling: a read-only kernel over the same bytes, timed alike in the same run, when
    // the operator writes (next to) nothing; else the device copy.
    bool read_only = false;
};

const OpDriver &abs_max_driver();
const OpDriver &cast_transpose_driver();
const OpDriver &w8_linear_driver();
const OpDriver &w4_linear_driver();
const OpDriver &quantize_fp8_driver();

}  // namespace explore
