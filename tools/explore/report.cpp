#include "report.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace explore {
namespace {

const char *outcome_name(Outcome o) {
    switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::skipped: return "skipped";
    case Outcome::failed: return "failed";
    default: return "dispatch";
    }
}

// Measured variants fastest first, then skipped and failed ones, then the dispatch check.
std::vector<const Row *> ranked(const std::vector<Row> &rows) {
    std::vector<const Row *> out;
    for (const Row &r : rows) out.push_back(&r);
    auto order = [](const Row *r) {
        return r->outcome == Outcome::ok ? 0 : r->outcome == Outcome::dispatch ? 3 : r->outcome == Outcome::skipped ? 1 : 2;
    };
    std::stable_sort(out.begin(), out.end(), [&](const Row *a, const Row *b) {
        if (order(a) != order(b)) return order(a) < order(b);
        return a->outcome == Outcome::ok && a->time.median_us < b->time.median_us;
    });
    return out;
}

// Consecutive rows of one op, dtypes and shape.
std::vector<std::vector<Row>> groups(const std::vector<Row> &rows) {
    std::vector<std::vector<Row>> out;
    for (const Row &r : rows) {
        if (out.empty() || out.back()[0].op != r.op || out.back()[0].dtypes != r.dtypes || out.back()[0].shape != r.shape) {
            out.emplace_back();
        }
        out.back().push_back(r);
    }
    return out;
}

std::ofstream open_for_writing(const std::string &path) {
    std::ofstream f(path, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + path);
    return f;
}

std::string csv_field(const std::string &s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string xml_text(const std::string &s) {
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

std::string fixed(double v, int decimals) {
    std::ostringstream s;
    s.setf(std::ios::fixed);
    s.precision(decimals);
    s << v;
    return s.str();
}

}  // namespace

void print_table(std::FILE *out, const std::vector<Row> &rows, const RunInfo &info) {
    if (rows.empty()) return;
    const Row &first = rows[0];
    std::fprintf(out, "\n## %s %s %s on %s (ceiling: %s, %.0f GB/s)\n", first.op.c_str(), first.dtypes.c_str(),
                 first.shape.c_str(), info.device_name.c_str(), info.ceiling.c_str(), first.ceiling_gbps);
    size_t width = 7;
    for (const Row &r : rows) width = std::max(width, r.variant.size());
    std::fprintf(out, "| rank | %-*s | median us | p10-p90 us      |   GB/s | %% of ceiling |\n", int(width), "variant");
    std::fprintf(out, "|------|-%s-|-----------|-----------------|--------|--------------|\n",
                 std::string(width, '-').c_str());
    const Row *best = nullptr;
    int rank = 0;
    for (const Row *r : ranked(rows)) {
        switch (r->outcome) {
        case Outcome::ok:
            if (!best) best = r;
            std::fprintf(out, "| %4d | %-*s | %9.2f | %7.2f-%-7.2f | %6.0f | %11.1f%% |\n", ++rank, int(width),
                         r->variant.c_str(), r->time.median_us, r->time.p10_us, r->time.p90_us, r->gbps, r->percent());
            break;
        case Outcome::skipped:
        case Outcome::failed:
            std::fprintf(out, "|    - | %-*s | %s: %s |\n", int(width), r->variant.c_str(),
                         r->outcome == Outcome::skipped ? "skipped" : "FAILED", r->note.c_str());
            break;
        case Outcome::dispatch:
            std::fprintf(out, "dispatch chose %s (%s): %.2f us", r->variant.c_str(), r->note.c_str(), r->time.median_us);
            if (best) {
                std::fprintf(out, ", %.3fx the best (%s, %.2f us)", r->time.median_us / best->time.median_us,
                             best->variant.c_str(), best->time.median_us);
            }
            std::fprintf(out, "\n");
            break;
        }
    }
}

void write_csv(const std::string &path, const std::vector<Row> &rows, const RunInfo &info) {
    std::ofstream f = open_for_writing(path);
    f << "date,op,dtypes,shape,device,device_name,variant,status,median_us,p10_us,p90_us,repeats,gb_per_s,"
         "ceiling_gb_per_s,percent_of_ceiling,note\n";
    for (const Row &r : rows) {
        const bool timed = r.outcome == Outcome::ok || r.outcome == Outcome::dispatch;
        auto num = [&](double v, int decimals) { return timed ? fixed(v, decimals) : std::string(); };
        f << info.date << ',' << r.op << ',' << csv_field(r.dtypes) << ',' << r.shape << ',' << info.device << ','
          << csv_field(info.device_name) << ',' << r.variant << ',' << outcome_name(r.outcome) << ','
          << num(r.time.median_us, 3) << ',' << num(r.time.p10_us, 3) << ',' << num(r.time.p90_us, 3) << ','
          << (timed ? std::to_string(r.time.repeats) : "") << ',' << num(r.gbps, 1) << ',' << fixed(r.ceiling_gbps, 1)
          << ',' << num(r.percent(), 2) << ',' << csv_field(r.note) << '\n';
    }
    if (!f.flush()) throw std::runtime_error("cannot write " + path);
}

void write_svg(const std::string &path, const std::vector<Row> &rows, const RunInfo &info) {
    // Horizontal bars: one per variant, grouped per op, dtypes and shape.
    constexpr int kLabel = 340, kBar = 440, kRowH = 18, kGroupH = 30, kTop = 70;
    constexpr double kMaxPercent = 120;  // a bar longer than this is cut (the label keeps the number)
    const int width = kLabel + int(kBar * kMaxPercent / 100) + 150;
    std::ostringstream body;
    int y = kTop;
    for (const std::vector<Row> &g : groups(rows)) {
        y += kGroupH;
        body << "<text x=\"10\" y=\"" << y - 8 << "\" font-weight=\"bold\">"
             << xml_text(g[0].op + " " + g[0].dtypes + " " + g[0].shape) << " (ceiling "
             << fixed(g[0].ceiling_gbps, 0) << " GB/s)</text>\n";
        for (const Row *r : ranked(g)) {
            const bool dispatch = r->outcome == Outcome::dispatch;
            body << "<text x=\"10\" y=\"" << y + 13 << "\">" << xml_text(dispatch ? "dispatch: " + r->variant : r->variant)
                 << "</text>\n";
            if (r->outcome == Outcome::ok || dispatch) {
                const double w = kBar * std::min(r->percent(), kMaxPercent) / 100;
                body << "<rect x=\"" << kLabel << "\" y=\"" << y + 2 << "\" width=\"" << fixed(w, 1) << "\" height=\""
                     << kRowH - 4 << "\" fill=\"" << (dispatch ? "#e08a2c" : "#3b75af") << "\"/>\n"
                     << "<text x=\"" << kLabel + int(w) + 5 << "\" y=\"" << y + 13 << "\">" << fixed(r->percent(), 1)
                     << "% (" << fixed(r->time.median_us, 2) << " us)</text>\n";
            } else {
                body << "<text x=\"" << kLabel << "\" y=\"" << y + 13 << "\" fill=\"#999\">"
                     << (r->outcome == Outcome::skipped ? "skipped: " : "FAILED: ") << xml_text(r->note) << "</text>\n";
            }
            y += kRowH;
        }
    }
    const int height = y + 20;
    std::ofstream f = open_for_writing(path);
    f << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">schedx-explore: percent of the " << xml_text(info.ceiling)
      << " bandwidth per variant</text>\n"
      << "<text x=\"10\" y=\"42\">" << xml_text(info.device_name + " (" + info.device + "), " + info.date)
      << "; bytes read + written per call / median time</text>\n";
    for (int p = 0; p <= int(kMaxPercent); p += 20) {
        const int x = kLabel + kBar * p / 100;
        f << "<line x1=\"" << x << "\" y1=\"" << kTop - 10 << "\" x2=\"" << x << "\" y2=\"" << height - 15
          << "\" stroke=\"" << (p == 100 ? "#444" : "#ddd") << "\"/>\n"
          << "<text x=\"" << x << "\" y=\"" << kTop - 14 << "\" text-anchor=\"middle\" fill=\"#666\">" << p << "%</text>\n";
    }
    f << body.str() << "</svg>\n";
    if (!f.flush()) throw std::runtime_error("cannot write " + path);
}

}  // namespace explore
