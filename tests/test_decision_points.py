"""tools/decision_points.py counts decision points per function, and no generator's generate()
(or generate_* part) or schedule function has more than 15 (issue 48: one generator per kernel
family, an algorithm that does not branch on its schedule)."""
from __future__ import annotations

import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import decision_points  # noqa: E402

LIMIT = 15
SAMPLE = r'''
namespace {
class G : public Generator<G> {
    void generate() {
        // if (commented) && || ?
        const char *s = "if && || ? case";
        char q = '?';
        if (a && b) f(); else if (c || d) g();
        int v = e ? 1 : 2;
        auto lam = [&](int i) { if (i) return 1; return 0; };
        switch (v) { case 1: break; case 2: break; }
        for (int i = 0; i < 2; i++) {}
    }
    int k_step() const { return x ? 1 : 2; }
    void schedule_cuda() override {}
};
}
Expr free_function(Expr e) { return select(e > 0 && e < 4, e, 0); }
'''


class Counts(unittest.TestCase):
    def test_each_kind_counts_once_and_literals_do_not(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "sample.cpp"
            f.write_text(SAMPLE)
            found = {fn.name: fn.decisions for fn in decision_points.functions(f)}
        # generate: if, &&, if, ||, ?, the lambda's if, two cases
        self.assertEqual(found, {"generate": 8, "k_step": 1, "schedule_cuda": 0, "free_function": 1})

    def test_generators_stay_under_the_bound(self) -> None:
        files = sorted((ROOT / "generators").glob("*.cpp")) + sorted((ROOT / "generators").glob("*.h"))
        found = [f for p in files for f in decision_points.functions(p)]
        self.assertTrue(any(f.name == "generate" for f in found))
        over = [f"{f.file}:{f.line} {f.name}: {f.decisions}" for f in found
                if decision_points.bounded(f) and f.decisions > LIMIT]
        self.assertEqual(over, [])


if __name__ == "__main__":
    unittest.main()
