// The tuning database: append-only JSON lines, one measurement per line.
#pragma once

#include <string>
#include <vector>

#include "dispatch.h"

namespace schedx {

// Fastest recorded runnable variant for the workload (exact shape, else nearest shape
// bucket), with the reason; nullptr when nothing usable is recorded.
const Variant *tuning_db_best(const Workload &w, const std::vector<const Variant *> &runnable, std::string *reason);

}  // namespace schedx
