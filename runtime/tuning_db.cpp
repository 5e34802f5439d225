#include "tuning_db.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cuda_interop.h"
#include "status.h"

namespace schedx {
namespace {

const char *device_string(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

std::string cpu_model() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("model name", 0) != 0) continue;
        const size_t value = line.find_first_not_of(" \t", line.find(':') + 1);
        if (value != std::string::npos) return line.substr(value);
    }
    return "unknown cpu";
}

std::string env(const char *name) {
    const char *v = std::getenv(name);
    return v ? v : "";
}

// The "timing" field: how the calls of a record were timed (explore's --dirty-cache or not).
constexpr const char *kBackToBack = "back_to_back";
constexpr const char *kDirtyCache = "dirty_cache";

// A record as read back, with the stamp it was written with.
struct StoredRecord {
    std::string op, dtypes, device, device_name, library_version, variant;
    int driver_version;
    std::vector<int64_t> shape;
    double median_us;
    bool dirty_cache;
};

bool parse(const std::string &line, StoredRecord *r) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return false;
    // nlohmann converts a JSON float to an integer with a plain cast, undefined when out of
    // range (fuzz_tuning_db under UBSan: "driver_version": 1e300): integer fields must be
    // JSON integers.
    const auto driver = j.find("driver_version"), shape = j.find("shape"), timing = j.find("timing");
    if (driver == j.end() || !driver->is_number_integer() || shape == j.end() || !shape->is_array()) return false;
    // Records written before the field existed were timed back to back.
    if (timing != j.end() && (!timing->is_string() || (*timing != kBackToBack && *timing != kDirtyCache))) return false;
    for (const nlohmann::json &d : *shape) {
        if (!d.is_number_integer()) return false;
    }
    try {
        *r = {j.at("op").get<std::string>(),
              j.at("dtypes").get<std::string>(),
              j.at("device").get<std::string>(),
              j.at("device_name").get<std::string>(),
              j.at("library_version").get<std::string>(),
              j.at("variant").get<std::string>(),
              j.at("driver_version").get<int>(),
              j.at("shape").get<std::vector<int64_t>>(),
              j.at("median_us").get<double>(),
              timing != j.end() && *timing == kDirtyCache};
    } catch (const nlohmann::json::exception &) {
        return false;
    }
    bool ok = !r->shape.empty() && r->median_us > 0;
    for (int64_t d : r->shape) ok &= d > 0;
    return ok;
}

struct Choice {
    const Variant *variant;
    std::string reason;
};

// The file as last read, identified by what stat() says, and the answers given from it.
struct FileState {
    std::string path;
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    timespec mtime{};
    // op, dtypes, device -> that workload's records, in file order.
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<StoredRecord>> records;
    // Lookups are memoised so a dispatched call costs a stat() and a map find, not a scan.
    std::map<std::tuple<std::string, std::string, Device, std::vector<int64_t>, std::vector<const Variant *>>, Choice>
        answers;
};

std::mutex db_mutex;
FileState db;  // guarded by db_mutex
// When the file was last stat()ed, and whether the next lookup must stat it regardless
// (this process appended, or a test asked): a stat() per call was a seventh of the host
// time of a small call.
std::chrono::steady_clock::time_point db_checked;
bool db_recheck = true;
uint64_t db_generation = 0;  // bumped whenever `db` is replaced (dispatch memoises by it)
constexpr std::chrono::milliseconds kRecheckInterval{100};

void load(FileState *f) {
    std::ifstream in(f->path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t damaged = 0, first_damaged = 0, line_no = 0;
    // Text after the last newline is a record still being written: not read.
    for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
        line_no++;
        const std::string line = text.substr(start, end - start);
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        StoredRecord r;
        if (parse(line, &r)) {
            f->records[{r.op, r.dtypes, r.device}].push_back(std::move(r));
        } else if (damaged++ == 0) {
            first_damaged = line_no;
        }
    }
    if (damaged) {
        std::fprintf(stderr, "schedx: tuning database %s: skipped %zu damaged line(s), the first at line %zu\n",
                     f->path.c_str(), damaged, first_damaged);
    }
}

// Re-reads the database when its path or file changed since the last read, looking at
// the file at most every kRecheckInterval: another process's appends (explore running
// next to a server) apply within that interval, this process's own from the next call.
void refresh(const std::string &path) {
    const auto now = std::chrono::steady_clock::now();
    if (path == db.path && !db_recheck && now - db_checked < kRecheckInterval) return;
    db_checked = now;
    db_recheck = false;
    struct stat st {};
    const bool exists = stat(path.c_str(), &st) == 0;
    if (path == db.path && exists == db.exists &&
        (!exists || (st.st_dev == db.dev && st.st_ino == db.ino && st.st_size == db.size &&
                     st.st_mtim.tv_sec == db.mtime.tv_sec && st.st_mtim.tv_nsec == db.mtime.tv_nsec))) {
        return;
    }
    db = FileState{path, exists};
    db_generation++;
    if (!exists) return;
    db.dev = st.st_dev;
    db.ino = st.st_ino;
    db.size = st.st_size;
    db.mtime = st.st_mtim;
    load(&db);
}

Choice best_recorded(const Workload &w, const std::vector<const Variant *> &runnable) {
    auto group = db.records.find({w.op, w.dtypes, device_string(w.device)});
    if (group == db.records.end()) return {nullptr, ""};
    const DeviceStamp &stamp = device_stamp(w.device);
    // The latest median of each (shape, timing, runnable variant): a re-measurement supersedes.
    struct Times {
        std::map<const Variant *, double> back_to_back, dirty_cache;
        const std::map<const Variant *, double> &preferred() const {
            return dirty_cache.empty() ? back_to_back : dirty_cache;
        }
    };
    std::map<std::vector<int64_t>, Times> by_shape;
    for (const StoredRecord &r : group->second) {
        if (r.device_name != stamp.device_name || r.driver_version != stamp.driver_version ||
            r.library_version != library_version() || r.shape.size() != w.shape.size()) {
            continue;
        }
        for (const Variant *v : runnable) {
            if (v->name != r.variant) continue;
            Times &t = by_shape[r.shape];
            (r.dirty_cache ? t.dirty_cache : t.back_to_back)[v] = r.median_us;
        }
    }
    auto fastest = [](const Times &shape_times) {
        const std::map<const Variant *, double> &times = shape_times.preferred();
        auto it = times.begin();
        for (auto t = times.begin(); t != times.end(); ++t) {
            if (t->second < it->second) it = t;
        }
        return it->first;
    };
    auto exact = by_shape.find(w.shape);
    auto timing_note = [](const Times &t) { return t.dirty_cache.empty() ? "" : ", dirty-cache timing"; };
    if (exact != by_shape.end()) {
        return {fastest(exact->second), std::string("tuned exact shape") + timing_note(exact->second)};
    }
    // A recorded shape is in the call's bucket when every dimension is within 2x; the
    // nearest is the one with the least summed |log2| distance.
    const std::vector<int64_t> *nearest = nullptr;
    double nearest_distance = std::numeric_limits<double>::infinity();
    for (const auto &[shape, times] : by_shape) {
        double distance = 0;
        bool in_bucket = true;
        for (size_t i = 0; i < shape.size(); i++) {
            const double d = std::fabs(std::log2(double(shape[i]) / double(w.shape[i])));
            in_bucket &= d <= 1.0;
            distance += d;
        }
        if (in_bucket && distance < nearest_distance) {
            nearest = &shape;
            nearest_distance = distance;
        }
    }
    if (!nearest) return {nullptr, ""};
    const Times &near = by_shape[*nearest];
    return {fastest(near), "tuned bucket (nearest recorded shape " + shape_string(*nearest) + timing_note(near) + ")"};
}

void make_parent_dirs(const std::string &path) {
    for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        mkdir(path.substr(0, slash).c_str(), 0755);  // EEXIST is fine; open() reports the rest
    }
}

}  // namespace

std::string utc_date() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string shape_string(const std::vector<int64_t> &shape) {
    std::string s;
    for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
}

const DeviceStamp &device_stamp(Device device) {
    // Read once per process. Device 0's name stands for the machine: schedx assumes its
    // GPUs are alike. The CUDA stamp starts the driver, so it is only taken for CUDA calls.
    if (device == Device::cuda) {
        static const DeviceStamp cuda{cuda_device_name(0), cuda_driver_version()};
        return cuda;
    }
    static const DeviceStamp cpu{cpu_model(), 0};
    return cpu;
}

const char *library_version() { return SCHEDX_LIBRARY_VERSION; }

std::string tuning_db_path() {
    std::string path = env("SCHEDX_TUNING_DB");
    if (!path.empty()) return path;
    std::string cache = env("XDG_CACHE_HOME");
    if (cache.empty()) {
        const std::string home = env("HOME");
        if (home.empty()) return "";
        cache = home + "/.cache";
    }
    return cache + "/schedx/tuning.jsonl";
}

schedx_status tuning_db_append(const std::vector<TuningRecord> &records) {
    const std::string path = tuning_db_path();
    if (path.empty()) return fail(SCHEDX_ERR_DATABASE, "no tuning database path: set SCHEDX_TUNING_DB or HOME");
    const std::string date = utc_date();
    std::string lines;
    for (const TuningRecord &r : records) {
        const DeviceStamp &stamp = device_stamp(r.workload.device);
        const nlohmann::ordered_json j = {{"op", r.workload.op},
                                          {"dtypes", r.workload.dtypes},
                                          {"shape", r.workload.shape},
                                          {"device", device_string(r.workload.device)},
                                          {"device_name", stamp.device_name},
                                          {"driver_version", stamp.driver_version},
                                          {"library_version", library_version()},
                                          {"variant", r.variant},
                                          {"median_us", r.median_us},
                                          {"p10_us", r.p10_us},
                                          {"p90_us", r.p90_us},
                                          {"repeats", r.repeats},
                                          {"timing", r.dirty_cache ? kDirtyCache : kBackToBack},
                                          {"date", date}};
        lines += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    make_parent_dirs(path);
    const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return fail(SCHEDX_ERR_DATABASE, "cannot open tuning database " + path + ": " + std::strerror(errno));
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    size_t done = 0;
    int err = 0;
    while (done < lines.size()) {
        const ssize_t n = write(fd, lines.data() + done, lines.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            err = n < 0 ? errno : ENOSPC;
            break;
        }
        done += size_t(n);
    }
    flock(fd, LOCK_UN);
    close(fd);
    tuning_db_recheck();
    if (err) return fail(SCHEDX_ERR_DATABASE, "cannot write tuning database " + path + ": " + std::strerror(err));
    return SCHEDX_OK;
}

uint64_t tuning_db_generation() {
    std::lock_guard<std::mutex> lock(db_mutex);
    if (db_recheck || std::chrono::steady_clock::now() - db_checked >= kRecheckInterval) refresh(tuning_db_path());
    return db_generation;
}

void tuning_db_recheck() {
    std::lock_guard<std::mutex> lock(db_mutex);
    db_recheck = true;
}

const Variant *tuning_db_best(const Workload &w, const std::vector<const Variant *> &runnable, std::string *reason) {
    const std::string path = tuning_db_path();
    if (path.empty() || runnable.empty()) return nullptr;
    std::lock_guard<std::mutex> lock(db_mutex);
    refresh(path);
    if (db.records.empty()) return nullptr;
    auto key = std::make_tuple(w.op, w.dtypes, w.device, w.shape, runnable);
    auto it = db.answers.find(key);
    if (it == db.answers.end()) it = db.answers.emplace(std::move(key), best_recorded(w, runnable)).first;
    if (it->second.variant) *reason = it->second.reason;
    return it->second.variant;
}

}  // namespace schedx
