// schedx-explore: for each operator, shape and applicable variant, check the variant
// against an independent reference, time it, rank it against a bandwidth ceiling measured
// in the same run (a device copy, or a read-only kernel for operators that only read), and
// append the measurements to the tuning database that dispatch reads. See --help.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <HalideRuntime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

#include "backend.h"
#include "dispatch.h"
#include "driver.h"
#include "measure.h"
#include "report.h"
#include "tuning_db.h"

namespace explore {
namespace {

const std::vector<const OpDriver *> &drivers() {
    static const std::vector<const OpDriver *> all{&cast_transpose_driver(), &w8_linear_driver(), &quantize_fp8_driver(),
                                                   &abs_max_driver(), &w4_linear_driver()};
    return all;
}

// GB/s (bytes read + written) of copying `bytes` with the same buffer rotation a
// kernel moving 2 * `bytes` gets.
double copy_ceiling_gbps(Backend &b, size_t bytes, const Timing &timing) {
    const int sets = rotation_sets(b, 2 * uint64_t(bytes));
    Pool src(b, bytes, sets), dst(b, bytes, sets);
    b.fill(src.at(0), 0x3C, src.slot_bytes() * sets);  // touched, so no page is the shared zero page
    b.fill(dst.at(0), 0, dst.slot_bytes() * sets);
    const Measurement t = measure(b, [&](int s) { b.copy(dst.at(s), src.at(s), bytes); }, sets, timing);
    return 2.0 * double(bytes) / t.median_us / 1e3;
}

// GB/s of the read-only anchor over the instance's input, with the same rotation of sets.
double read_ceiling_gbps(Backend &b, const Instance &inst, const Timing &timing) {
    const Measurement t =
        measure(b, [&](int s) { b.read(inst.read_only_input(s), inst.bytes_moved()); }, inst.sets(), timing);
    return double(inst.bytes_moved()) / t.median_us / 1e3;
}

void throw_if_failed(schedx_status s) {
    if (s != SCHEDX_OK) throw std::runtime_error("status " + std::to_string(s) + ": " + schedx_last_error());
}

struct Options {
    std::string op = "all", device = "auto", db, csv, svg;
    std::vector<std::string> shapes, variants, configs, force_op;
    int repeats = 11;
    bool list = false, all = false, dirty_cache = false, copy_per_shape = false, ragged = false;
};

std::vector<int64_t> parse_shape(const std::string &text, const OpDriver &d) {
    std::vector<int64_t> shape;
    size_t pos = 0;
    while (pos <= text.size()) {
        const size_t x = std::min(text.find('x', pos), text.size());
        size_t used = 0;
        const std::string dim = text.substr(pos, x - pos);
        const long long v = dim.empty() ? 0 : std::stoll(dim, &used);
        if (used != dim.size() || v <= 0) throw CLI::ValidationError("--shapes", "bad shape " + text);
        shape.push_back(v);
        pos = x + 1;
    }
    const size_t rank = size_t(std::count(d.shape_dims.begin(), d.shape_dims.end(), 'x') + 1);
    if (shape.size() != rank) {
        throw CLI::ValidationError("--shapes", d.op + " shapes are " + d.shape_dims + ", not " + text);
    }
    return shape;
}

void print_registry() {
    std::printf("%-40s %-16s %-6s %s\n", "name", "op", "device", "params");
    for (int i = 0; i < schedx_variant_count(); i++) {
        schedx_variant_info v;
        schedx_get_variant(i, &v);
        std::printf("%-40s %-16s %-6s %s\n", v.name, v.op, v.device, v.params);
    }
}

class Explorer {
public:
    Explorer(Backend &b, Timing timing, double run_ceiling_gbps, std::vector<std::string> only)
        : b_(b), timing_(timing), run_ceiling_gbps_(run_ceiling_gbps), only_(std::move(only)), tty_(isatty(2)) {}

    // Explores one shape; returns its rows (the table) and appends its records.
    std::vector<Row> shape(const OpDriver &d, const std::string &config, const std::vector<int64_t> &shape) {
        const std::string shape_text = schedx::shape_string(shape);
        progress(d.op + " " + config + " " + shape_text + ": allocating");
        std::unique_ptr<Instance> inst = d.make(b_, config, shape);
        // An unforced call tells which variants apply and the workload key, as dispatch sees them.
        throw_if_failed(schedx_force_variant(d.op.c_str(), nullptr));
        throw_if_failed(inst->run(0));
        const schedx::DispatchTrace trace = *schedx::last_dispatch(d.op);
        const double ceiling = d.read_only            ? read_ceiling_gbps(b_, *inst, timing_)
                               : run_ceiling_gbps_ > 0 ? run_ceiling_gbps_
                                                       : copy_ceiling_gbps(b_, inst->bytes_moved() / 2, timing_);
        auto row = [&](const std::string &variant, Outcome outcome, const std::string &note, Measurement t) {
            return Row{d.op, trace.workload.dtypes, shape_text, variant, outcome, note, t,
                       t.median_us > 0 ? double(inst->bytes_moved()) / t.median_us / 1e3 : 0, ceiling};
        };
        auto time_current = [&] {
            return measure(b_, [&](int set) { throw_if_failed(inst->run(set)); }, inst->sets(), timing_);
        };
        std::vector<Row> rows;
        std::vector<schedx::TuningRecord> records;
        int index = 0;
        for (const schedx::Variant *v : *trace.candidates) {
            if (!selected(v->name)) continue;
            progress(d.op + " " + trace.workload.dtypes + " " + shape_text + ": " + std::to_string(++index) + "/" +
                     std::to_string(trace.candidates->size()) + " " + v->name);
            if (std::find(trace.runnable->begin(), trace.runnable->end(), v) == trace.runnable->end()) {
                rows.push_back(row(v->name, Outcome::skipped, "cannot run this shape or alignment", {}));
                continue;
            }
            throw_if_failed(schedx_force_variant(d.op.c_str(), v->name.c_str()));
            try {
                const std::string wrong = inst->check();
                if (!wrong.empty()) {
                    rows.push_back(row(v->name, Outcome::failed, "wrong result " + wrong, {}));
                    failures_++;
                    continue;
                }
                const Measurement t = time_current();
                rows.push_back(row(v->name, Outcome::ok, "", t));
                records.push_back({trace.workload, v->name, t.median_us, t.p10_us, t.p90_us, t.repeats, timing_.dirty_cache});
            } catch (const std::exception &e) {
                rows.push_back(row(v->name, Outcome::failed, e.what(), {}));
                failures_++;
            }
        }
        throw_if_failed(schedx_force_variant(d.op.c_str(), nullptr));
        if (!records.empty()) {
            throw_if_failed(schedx::tuning_db_append(records));
            appended_ += records.size();
        }
        // Dispatch check: the call as a user makes it, now that the database has this shape.
        progress(d.op + " " + trace.workload.dtypes + " " + shape_text + ": dispatch");
        const Measurement t = time_current();
        const schedx::DispatchTrace &after = *schedx::last_dispatch(d.op);
        rows.push_back(row(after.chosen->name, Outcome::dispatch, after.reason, t));
        progress("");
        return rows;
    }

    int failures() const { return failures_; }
    size_t appended() const { return appended_; }

private:
    bool selected(const std::string &name) const {
        if (only_.empty()) return true;
        return std::any_of(only_.begin(), only_.end(),
                           [&](const std::string &part) { return name.find(part) != std::string::npos; });
    }

    // One line on stderr, rewritten in place on a terminal.
    void progress(const std::string &line) {
        if (tty_) {
            std::fprintf(stderr, "\r\033[K%s", line.c_str());
        } else if (!line.empty()) {
            std::fprintf(stderr, "%s\n", line.c_str());
        }
    }

    Backend &b_;
    Timing timing_;
    double run_ceiling_gbps_;
    std::vector<std::string> only_;  // --variants: name parts; empty for all
    bool tty_;
    int failures_ = 0;
    size_t appended_ = 0;
};

// Each --variants part names at least one variant of a selected operator on this device: a
// part that names none would time nothing and look like a run that found nothing to do.
void check_variant_parts(const std::vector<std::string> &parts, const std::vector<const OpDriver *> &selected,
                         const std::string &device) {
    std::string ops;
    for (const OpDriver *d : selected) ops += (ops.empty() ? "" : ", ") + d->op;
    for (const std::string &part : parts) {
        bool named = false;
        for (int i = 0; i < schedx_variant_count() && !named; i++) {
            schedx_variant_info v;
            throw_if_failed(schedx_get_variant(i, &v));
            named = device == v.device && std::string(v.name).find(part) != std::string::npos &&
                    std::any_of(selected.begin(), selected.end(), [&](const OpDriver *d) { return d->op == v.op; });
        }
        if (!named) {
            throw std::runtime_error("--variants: no " + device + " variant of " + ops + " has '" + part +
                                     "' in its name (--list prints them)");
        }
    }
}

int run(const Options &o) {
    if (o.list) {
        print_registry();
        return 0;
    }
    std::unique_ptr<Backend> b;
    if (o.device != "cpu") {
        std::string why;
        b = make_cuda_backend(&why);
        if (!b && o.device == "cuda") throw std::runtime_error("--device cuda: " + why);
        if (!b) std::fprintf(stderr, "schedx-explore: %s; exploring the CPU variants\n", why.c_str());
    }
    if (!b) b = make_cpu_backend();
    if (!o.db.empty()) setenv("SCHEDX_TUNING_DB", o.db.c_str(), 1);

    std::vector<const OpDriver *> selected;
    for (const OpDriver *d : drivers()) {
        if (o.all || o.op == "all" || o.op == d->op) selected.push_back(d);
    }
    // On the CPU the anchors run on the variants' thread pool, at their thread count.
    // (Halide sets the count up at the pool's first parallel loop: one empty loop first.)
    halide_do_par_for(nullptr, [](void *, int, uint8_t *) { return 0; }, 0, 2, nullptr);
    const std::string cpu_threads = " on " + std::to_string(halide_get_num_threads()) + " threads";
    const bool cuda = b->device() == SCHEDX_DEVICE_CUDA;
    const RunInfo info{b->device_kind(), b->name(),
                       cuda ? "device-to-device copy" : "memcpy of half the bytes moved" + cpu_threads,
                       schedx::utc_date()};
    // On the GPU one large copy is the ceiling for every shape (as ../shared/ANCHORS.md
    // measures it); on the CPU the copy is sized per shape, since caches decide its speed.
    const Timing timing{o.repeats, o.dirty_cache};
    if (timing.dirty_cache) {
        std::printf("Timing: each call alone, after a write of %zu MiB (%zux the %s cache) left it full of dirty "
                    "lines, as do_bench's flush does\n",
                    kDirtyCacheFactor * b->cache_bytes() >> 20, kDirtyCacheFactor,
                    b->device() == SCHEDX_DEVICE_CUDA ? "L2" : "last-level");
    }
    double run_ceiling = 0;
    if (b->device() == SCHEDX_DEVICE_CUDA && !o.copy_per_shape) {
        std::fprintf(stderr, "measuring the device-to-device copy bandwidth\n");
        run_ceiling = copy_ceiling_gbps(*b, size_t(1) << 30, timing);
        std::printf("%s: device-to-device copy of 1 GiB: %.0f GB/s (read + write)\n", info.device_name.c_str(),
                    run_ceiling);
    }
    for (const std::string &c : o.configs) {
        const bool known = std::any_of(selected.begin(), selected.end(), [&](const OpDriver *d) {
            return std::find(d->configs.begin(), d->configs.end(), c) != d->configs.end();
        });
        if (!known) throw std::runtime_error("--configs: no selected operator has the configuration " + c);
    }
    for (const std::string &f : o.force_op) {  // OP=VARIANT, forced for the whole run
        const size_t eq = f.find('=');
        if (eq == std::string::npos) throw CLI::ValidationError("--force-op", "expected OP=VARIANT, got " + f);
        throw_if_failed(schedx_force_variant(f.substr(0, eq).c_str(), f.substr(eq + 1).c_str()));
    }
    check_variant_parts(o.variants, selected, b->device() == SCHEDX_DEVICE_CUDA ? "cuda" : "cpu");
    Explorer explorer(*b, timing, run_ceiling, o.variants);
    std::vector<Row> all_rows;
    for (const OpDriver *d : selected) {
        std::vector<std::vector<int64_t>> shapes;
        for (const std::string &s : o.shapes) shapes.push_back(parse_shape(s, *d));
        if (shapes.empty() && o.ragged) shapes = d->ragged_shapes;
        if (shapes.empty()) shapes = b->device() == SCHEDX_DEVICE_CUDA ? d->cuda_shapes : d->cpu_shapes;
        for (const std::string &config : d->configs) {
            if (!o.configs.empty() && std::find(o.configs.begin(), o.configs.end(), config) == o.configs.end()) continue;
            for (const auto &shape : shapes) {
                std::vector<Row> rows = explorer.shape(*d, config, shape);
                RunInfo shape_info = info;
                if (d->read_only) shape_info.ceiling = "read-only kernel over the same bytes" + (cuda ? "" : cpu_threads);
                print_table(stdout, rows, shape_info);
                std::fflush(stdout);
                all_rows.insert(all_rows.end(), rows.begin(), rows.end());
            }
        }
    }
    if (!o.csv.empty()) write_csv(o.csv, all_rows, info);
    if (!o.svg.empty()) write_svg(o.svg, all_rows, info);
    std::printf("\n%zu measurements appended to %s\n", explorer.appended(), schedx::tuning_db_path().c_str());
    if (explorer.failures()) std::printf("%d variant(s) FAILED their check\n", explorer.failures());
    return explorer.failures() ? 2 : 0;
}

}  // namespace
}  // namespace explore

int main(int argc, char **argv) {
    explore::Options o;
    CLI::App app{"Checks, times and ranks every applicable schedx variant per shape, and records the times in the "
                 "tuning database that dispatch reads."};
    std::vector<std::string> ops{"all"};
    for (const explore::OpDriver *d : explore::drivers()) ops.push_back(d->op);
    auto *op = app.add_option("--op", o.op, "operator to explore")->check(CLI::IsMember(ops));
    app.add_flag("--all", o.all, "every operator, default shapes")->excludes(op);
    std::string shape_forms;
    for (const explore::OpDriver *d : explore::drivers()) shape_forms += "; " + d->op + " " + d->shape_dims;
    app.add_option("--shapes", o.shapes,
                   "shapes, e.g. 4096x4096,8192x8192, written per operator (" + shape_forms.substr(2) +
                       ", e.g. w8_linear 4x4096x4096); default: per operator and device")
        ->delimiter(',');
    app.add_flag("--ragged", o.ragged,
                 "the ragged shape set (sizes off the tiles and steps, each beside an aligned neighbour) instead of "
                 "the default shapes")
        ->excludes("--shapes");
    app.add_option("--configs", o.configs,
                   "input configurations (default: every one the operator has: cast_transpose bf16, bf16+amax, "
                   "bf16/divide; w8_linear bf16, bf16+bias, fp16, bf16+sfp32)")
        ->delimiter(',');
    app.add_option("--variants", o.variants,
                   "time only variants whose names contain one of these parts, e.g. gemv,b8_ (default: all)")
        ->delimiter(',');
    app.add_option("--force-op", o.force_op,
                   "OP=VARIANT: force a variant of an operator that the explored one runs inside, e.g. "
                   "quantize_fp8_axis_codes=NAME (the tiled axiswise second pass)");
    app.add_option("--device", o.device, "cpu, cuda, or auto: cuda when a GPU is present")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
    app.add_option("--repeats", o.repeats, "timed samples per variant (median and p10/p90 reported)")
        ->check(CLI::Range(1, 1000));
    app.add_option("--db", o.db, "tuning database (default: $SCHEDX_TUNING_DB, else ~/.cache/schedx/tuning.jsonl)");
    app.add_option("--csv", o.csv, "write every measurement to this CSV file");
    app.add_option("--svg", o.svg, "write a chart of percent-of-ceiling per variant per shape");
    app.add_flag("--copy-per-shape", o.copy_per_shape,
                 "CUDA: rank each shape against a copy of its own bytes (half the bytes moved each way), "
                 "timed in the same run, instead of one 1 GiB copy");
    app.add_flag("--dirty-cache", o.dirty_cache,
                 "time each call alone after writing " + std::to_string(explore::kDirtyCacheFactor) +
                     "x the cache (L2 on the GPU), as triton's do_bench does, instead of back to back; the "
                     "torch anchors are measured that way");
    app.add_flag("--list", o.list, "print the variant registry and exit");
    CLI11_PARSE(app, argc, argv);
    if (!o.shapes.empty() && !o.all && o.op == "all" && explore::drivers().size() > 1) {
        std::fprintf(stderr, "--shapes needs a single --op (operators write shapes differently)\n");
        return 1;
    }
    try {
        return explore::run(o);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "schedx-explore: %s\n", e.what());
        return 1;
    }
}
