// Dispatch through the tuning database: exact and bucket hits, records from another
// machine or build ignored, damaged lines skipped, concurrent appends, forcing.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <fstream>
#include <thread>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tuning_db.h"

namespace {

using schedx::Device;

// The heuristic's pick at these shapes, below one 64 x 512 tile: the first untiled variant in variants.json.
constexpr const char *kFirst = "cast_transpose_bf16_cpu";
constexpr const char *kSecond = "cast_transpose_bf16_cpu_t64x512_amax";  // another variant that serves the call
constexpr const char *kKey = "bf16->e4m3fn:both+amax";

// A fresh database file named by SCHEDX_TUNING_DB for the test's lifetime.
class TempDb {
public:
    TempDb() {
        char name[] = "/tmp/schedx_tuning_XXXXXX";
        close(mkstemp(name));
        path = name;
        const char *old = std::getenv("SCHEDX_TUNING_DB");
        if (old) old_ = old;
        setenv("SCHEDX_TUNING_DB", path.c_str(), 1);
        schedx::tuning_db_recheck();  // mkstemp may reuse a name an earlier test's process read
    }
    ~TempDb() {
        std::remove(path.c_str());
        if (old_.empty()) {
            unsetenv("SCHEDX_TUNING_DB");
        } else {
            setenv("SCHEDX_TUNING_DB", old_.c_str(), 1);
        }
    }
    void write(const std::string &text) const { std::ofstream(path, std::ios::app) << text; }
    std::string path;

private:
    std::string old_;
};

// One record line, stamped as this machine and build would stamp it unless overridden.
std::string record(std::vector<int64_t> shape, const std::string &variant, double median_us,
                   const nlohmann::json &overrides = nlohmann::json::object()) {
    nlohmann::json j = {{"op", "cast_transpose"},
                        {"dtypes", kKey},
                        {"shape", shape},
                        {"device", "cpu"},
                        {"device_name", schedx::device_stamp(Device::cpu).device_name},
                        {"driver_version", 0},
                        {"library_version", schedx::library_version()},
                        {"variant", variant},
                        {"median_us", median_us},
                        {"p10_us", median_us},
                        {"p90_us", median_us},
                        {"repeats", 1},
                        {"date", "2026-12-02T00:00:00Z"}};
    j.update(overrides);
    return j.dump() + "\n";
}

// A bf16 -> e4m3fn call with both outputs and amax on the CPU; returns the variant it ran.
std::string dispatched(int64_t m, int64_t k) {
    std::vector<uint16_t> x(size_t(m * k), 0x3F80);
    std::vector<uint8_t> rows(x.size()), cols(x.size());
    float scale = 1.0f, amax = 0, scale_inv = 0;
    REQUIRE(schedx_cast_transpose_fp8(x.data(), m, k, k, SCHEDX_BF16, &scale, SCHEDX_E4M3FN, rows.data(), k,
                                      cols.data(), m, &amax, &scale_inv, SCHEDX_DEVICE_CPU, nullptr) == SCHEDX_OK);
    return schedx_last_variant("cast_transpose");
}

std::string reason() { return schedx_last_reason("cast_transpose"); }

}  // namespace

TEST_CASE("no database: the heuristic") {
    TempDb db;
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason().rfind("heuristic", 0) == 0);
}

TEST_CASE("exact shape: the fastest recorded variant, the latest measurement of each") {
    TempDb db;
    db.write(record({64, 64}, kFirst, 20) + record({64, 64}, kSecond, 10));
    CHECK(dispatched(64, 64) == kSecond);
    CHECK(reason() == "tuned exact shape");
    // Re-measured slower (as by explore in another process): supersedes, and is seen
    // without a restart once the 100 ms recheck interval has passed.
    db.write(record({64, 64}, kSecond, 30));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason() == "tuned exact shape");
}

TEST_CASE("bucket: the nearest recorded shape with every dimension within 2x") {
    TempDb db;
    db.write(record({64, 64}, kSecond, 10) + record({64, 64}, kFirst, 20) + record({256, 256}, kFirst, 10) +
             record({256, 256}, kSecond, 20));
    CHECK(dispatched(100, 48) == kSecond);
    CHECK(reason() == "tuned bucket (nearest recorded shape 64x64)");
    CHECK(dispatched(200, 300) == kFirst);
    CHECK(reason() == "tuned bucket (nearest recorded shape 256x256)");
    CHECK(dispatched(16, 64) == kFirst);  // 4x away from every record
    CHECK(reason().rfind("heuristic", 0) == 0);
}

TEST_CASE("dirty-cache records outrank back-to-back ones of the same shape") {
    TempDb db;
    const nlohmann::json dirty = {{"timing", "dirty_cache"}};
    // 64x64: timed back to back the fused variant wins, after a dirty cache the unfused one
    // (slower in absolute terms, as every dirty-cache time is): the dirty-cache ranking decides.
    db.write(record({64, 64}, kSecond, 10) + record({64, 64}, kFirst, 20, {{"timing", "back_to_back"}}) +
             record({64, 64}, kSecond, 40, dirty) + record({64, 64}, kFirst, 30, dirty));
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason() == "tuned exact shape, dirty-cache timing");
    // 256x256 has only back-to-back records: they still count, for the shape and its bucket.
    db.write(record({256, 256}, kSecond, 10) + record({256, 256}, kFirst, 20));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    CHECK(dispatched(256, 256) == kSecond);
    CHECK(reason() == "tuned exact shape");
    CHECK(dispatched(100, 48) == kFirst);
    CHECK(reason() == "tuned bucket (nearest recorded shape 64x64, dirty-cache timing)");
}

TEST_CASE("a record with an unknown timing is damaged, not read as either") {
    TempDb db;
    db.write(record({64, 64}, kFirst, 20) + record({64, 64}, kSecond, 10, {{"timing", "flushed"}}) +
             record({64, 64}, kSecond, 10, {{"timing", 1}}));
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason() == "tuned exact shape");
}

TEST_CASE("records of another device, driver, build, workload or a variant that cannot run are ignored") {
    TempDb db;
    db.write(record({64, 64}, kFirst, 20));
    db.write(record({64, 64}, kSecond, 1, {{"device_name", "Another CPU"}}));
    db.write(record({64, 64}, kSecond, 1, {{"driver_version", 12080}}));
    db.write(record({64, 64}, kSecond, 1, {{"library_version", "schedx 0.0.1, Halide 19.0.0"}}));
    db.write(record({64, 64}, kSecond, 1, {{"dtypes", "bf16->e5m2:both+amax"}}));
    db.write(record({64, 64}, kSecond, 1, {{"device", "cuda"}}));
    db.write(record({64, 64}, "cast_transpose_bf16_rows_cpu", 1));  // not a candidate for this call
    db.write(record({64, 64}, "cast_transpose_bf16_e4m3_t64r4w4", 1));   // a CUDA variant
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason() == "tuned exact shape");
}

TEST_CASE("damaged lines are skipped with one warning per load; a trailing partial line is not read") {
    TempDb db;
    db.write("not json\n" + record({64, 64}, kFirst, 20) + "{\"op\": \"cast_transpose\", \"shape\": \n" +
             record({64, 64}, kSecond, 10, {{"median_us", "fast"}}) + record({64, 64}, kSecond, 10, {{"shape", {64, -1}}}) +
             record({64, 64}, kSecond, 10, {{"variant", 7}}) + "[1, 2]\n\n" + record({64, 64}, kSecond, 10));
    db.write(record({64, 64}, kSecond, 1).substr(0, 50));  // still being written by another process
    // Capture stderr around two calls: the file is read once, so it warns once.
    std::fflush(stderr);
    char log[] = "/tmp/schedx_stderr_XXXXXX";
    const int log_fd = mkstemp(log), saved = dup(2);
    dup2(log_fd, 2);
    const std::string first = dispatched(64, 64), second = dispatched(64, 64);
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(log_fd);
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    std::remove(log);
    CHECK(first == kSecond);
    CHECK(second == kSecond);
    const std::string warning = text.str();
    CHECK(warning.find("skipped 6 damaged line(s), the first at line 1") != std::string::npos);
    CHECK(warning.find("damaged") == warning.rfind("damaged"));
}

TEST_CASE("concurrent appends from several processes lose nothing and tear no line") {
    TempDb db;
    constexpr int kProcs = 8, kEach = 100;
    const schedx::Workload w{"cast_transpose", kKey, Device::cpu, {64, 64}};
    schedx::device_stamp(Device::cpu);  // read /proc/cpuinfo once, before forking
    std::vector<pid_t> children;
    for (int p = 0; p < kProcs; p++) {
        const pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            bool ok = true;
            for (int i = 0; i < kEach; i++) {
                const double us = p * 1000 + i + 1;
                ok &= schedx::tuning_db_append({{w, kFirst, us, us, us, 1}}) == SCHEDX_OK;
            }
            _exit(ok ? 0 : 1);
        }
        children.push_back(pid);
    }
    for (pid_t pid : children) {
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    std::ifstream in(db.path);
    std::string line;
    std::set<double> seen;
    int lines = 0;
    while (std::getline(in, line)) {
        lines++;
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        REQUIRE_FALSE(j.is_discarded());
        seen.insert(j.at("median_us").get<double>());
    }
    CHECK(lines == kProcs * kEach);
    CHECK(seen.size() == size_t(kProcs * kEach));
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason() == "tuned exact shape");
}

TEST_CASE("a forced variant wins over the database; unknown names are rejected") {
    TempDb db;
    db.write(record({64, 64}, kSecond, 10) + record({64, 64}, kFirst, 20));
    REQUIRE(schedx_force_variant("cast_transpose", kFirst) == SCHEDX_OK);
    CHECK(dispatched(64, 64) == kFirst);
    CHECK(reason() == "forced");
    CHECK(schedx_force_variant("cast_transpose", "cast_transpose_no_such_variant") == SCHEDX_ERR_UNKNOWN_VARIANT);
    CHECK(schedx_force_variant("cast_transpose", "abs_max_bf16_cpu") == SCHEDX_ERR_UNKNOWN_VARIANT);  // another op's
    CHECK(schedx_force_variant("no_such_op", kFirst) == SCHEDX_ERR_UNKNOWN_VARIANT);
    CHECK(dispatched(64, 64) == kFirst);  // a rejected name leaves the forcing as it was
    CHECK(reason() == "forced");
    REQUIRE(schedx_force_variant("cast_transpose", nullptr) == SCHEDX_OK);
    CHECK(dispatched(64, 64) == kSecond);
    CHECK(reason() == "tuned exact shape");
}
