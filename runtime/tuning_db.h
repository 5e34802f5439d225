// The tuning database: append-only JSON lines, one measurement per line, written by
// schedx-explore and read by dispatch. A record counts only on the machine and build
// that made it: same device name, driver version and library version.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dispatch.h"

namespace schedx {

// One measurement. Appending stamps it with the device name, driver and library
// versions and the date.
struct TuningRecord {
    Workload workload;
    std::string variant;
    double median_us, p10_us, p90_us;  // spread: 10th and 90th percentile of the repeats
    int repeats;
    bool dirty_cache = false;  // each call timed alone after a write of several times the cache
};

// What a record is stamped with, and must match to be used.
struct DeviceStamp {
    std::string device_name;  // GPU name, or the CPU model from /proc/cpuinfo
    int driver_version;       // cuda_driver_version(), 0 on the CPU
};
const DeviceStamp &device_stamp(Device device);
const char *library_version();  // "schedx <version>, Halide <version>"

// "4096x4096"
std::string shape_string(const std::vector<int64_t> &shape);
std::string utc_date();  // "2026-12-02T12:00:00Z", the records' date format

// $SCHEDX_TUNING_DB, else $XDG_CACHE_HOME/schedx/tuning.jsonl, else ~/.cache/schedx/tuning.jsonl.
std::string tuning_db_path();

// Appends the records in one write() of whole lines under an exclusive flock, so
// concurrent writers lose nothing and readers never see a torn line except the last.
schedx_status tuning_db_append(const std::vector<TuningRecord> &records);

// Fastest recorded variant among `runnable` for the exact shape, else for the nearest
// recorded shape in the same bucket (every dimension within 2x), with the reason; nullptr
// when nothing usable is recorded. Where a shape has dirty-cache records, only those are
// compared: they time a call as a model's layer meets the cache, full of the previous
// kernel's writes (on the H200 the back-to-back winner at 16x8192x8192 took 1.18x the
// dirty-cache winner there). The file is re-read when it changes, checked at most
// every 100 ms, and at the next lookup after this process appends.
const Variant *tuning_db_best(const Workload &w, const std::vector<const Variant *> &runnable, std::string *reason);

// Changes whenever the database as read changes (the file, or the path the environment
// names). Like a lookup, looks at the file at most every 100 ms.
uint64_t tuning_db_generation();

// Makes the next lookup check the file at once (tests that write it as another process would).
void tuning_db_recheck();

}  // namespace schedx
