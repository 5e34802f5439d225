// What schedx-explore prints and writes: the ranked table per shape, the CSV (one row per
// measurement) and the SVG chart of percent-of-ceiling per variant per shape.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "measure.h"

namespace explore {

enum class Outcome { ok, skipped, failed, dispatch };

struct Row {
    std::string op, dtypes, shape, variant;
    Outcome outcome;
    std::string note;  // why skipped or failed; dispatch's reason
    Measurement time;  // ok and dispatch rows
    double gbps = 0, ceiling_gbps = 0;
    double percent() const { return ceiling_gbps > 0 ? 100.0 * gbps / ceiling_gbps : 0; }
};

// Where and when the rows were measured, for the CSV and the chart's title.
struct RunInfo {
    std::string device, device_name, ceiling, date;  // ceiling: what it is, e.g. "device copy"
};

// Rows of one op, dtypes and shape: variants fastest first, then skipped and failed ones,
// then the dispatch check.
void print_table(std::FILE *out, const std::vector<Row> &rows, const RunInfo &info);
// Both throw std::runtime_error when the file cannot be written.
void write_csv(const std::string &path, const std::vector<Row> &rows, const RunInfo &info);
void write_svg(const std::string &path, const std::vector<Row> &rows, const RunInfo &info);

}  // namespace explore
