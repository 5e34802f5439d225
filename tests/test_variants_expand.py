"""tools/variants.py: spaces expand in order into variants named from their parameters."""
from __future__ import annotations

import json
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import variants  # noqa: E402

W8 = {"generator": "w8_linear", "input_param": "x_type"}


def expand(spaces: list[dict], op: str = "w8_linear", header: dict = W8) -> list[variants.Variant]:
    return variants.expand({"operators": {op: {**header, "spaces": spaces}}})


class Expand(unittest.TestCase):
    def test_lists_span_values_types_innermost(self) -> None:
        out = expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": [16, 8], "coalesced": True,
                       "types": "bf16_sbf16 fp16_sfp32_bias"}])
        self.assertEqual([v.name for v in out], [
            "w8_linear_bf16_sbf16_gemv_r2w16_coalesced", "w8_linear_fp16_sfp32_bias_gemv_r2w16_coalesced",
            "w8_linear_bf16_sbf16_gemv_r2w8_coalesced", "w8_linear_fp16_sfp32_bias_gemv_r2w8_coalesced"])
        self.assertEqual(out[3].params, {"x_type": "fp16", "scale_type": "fp32", "with_bias": "true",
                                         "schedule": "cuda_gemv", "rows_per_warp": "2", "load_words": "8",
                                         "coalesced": "true"})
        self.assertEqual(out[3].device, "cuda")
        self.assertEqual(out[3].settings, {})

    def test_null_leaves_a_parameter_out(self) -> None:
        out = expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": 8, "coalesced": [True, None],
                       "types": "bf16_sbf16"}])
        self.assertEqual([v.name for v in out], ["w8_linear_bf16_sbf16_gemv_r2w8_coalesced",
                                                 "w8_linear_bf16_sbf16_gemv_r2w8"])
        self.assertNotIn("coalesced", out[1].params)

    def test_booleans_reach_the_generator_as_halide_spells_them(self) -> None:
        out = expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": 8, "coalesced": [True, False],
                       "types": "bf16_sbf16"}])
        self.assertEqual([v.params["coalesced"] for v in out], ["true", "false"])

    def test_a_group_builds_its_spaces_type_by_type(self) -> None:
        out = expand([{"types": "bf16_sbf16_bias fp16_sfp32", "warps": 4, "spaces": [
            {"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": 8},
            {"schedule": "cuda_smallbatch", "batch": 4, "rows_per_warp": 1, "load_words": 2}]}])
        self.assertEqual([v.name for v in out], [
            "w8_linear_bf16_sbf16_bias_gemv_r2w8", "w8_linear_bf16_sbf16_bias_b4_r1w2",
            "w8_linear_fp16_sfp32_gemv_r2w8", "w8_linear_fp16_sfp32_b4_r1w2"])
        self.assertEqual(out[3].params["warps"], "4")
        with self.assertRaisesRegex(ValueError, "restates"):
            expand([{"types": "bf16_sbf16", "warps": 4, "spaces": [{"schedule": "cuda_gemv", "warps": 8}]}])

    def test_autoschedulers_span_like_parameters(self) -> None:
        out = expand([{"device": "cpu", "autoscheduler": ["Adams2019", "Mullapudi2016"], "schedule": "auto",
                       "autoscheduler.parallelism": 16, "types": "bf16_sbf16"}])
        self.assertEqual([(v.name, v.autoscheduler, v.device) for v in out], [
            ("w8_linear_bf16_sbf16_auto_adams2019_cpu", "Adams2019", "cpu"),
            ("w8_linear_bf16_sbf16_auto_mullapudi2016_cpu", "Mullapudi2016", "cpu")])
        self.assertNotIn("autoscheduler", out[0].params)

    def test_differences_name_each_change(self) -> None:
        a = expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": [8, 4], "types": "bf16_sbf16"}])
        b = expand([{"schedule": "cuda_gemv", "load_words": 8, "rows_per_warp": 2, "types": "bf16_sbf16"}])
        self.assertEqual(variants.differences(a[:1], b), [])  # parameters' order is not a difference
        self.assertEqual(variants.differences(a, b), ["only before: w8_linear_bf16_sbf16_gemv_r2w4"])
        c = expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": 8, "jit_max_registers": 128,
                     "types": "bf16_sbf16"}])
        self.assertEqual(len(variants.differences(b, c)), 1)

    def test_a_stage_or_schedule_picks_the_generator(self) -> None:
        header = {**W8, "generators": {"cuda_gemv": "w8_linear_lanes", "planes": "w8_planes"}}
        out = expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": 8, "types": "bf16_sbf16"},
                      {"schedule": "cuda_row_blocks", "stage": "planes", "types": "bf16"},
                      {"schedule": "cpu", "types": "bf16_sbf16"}], header=header)
        self.assertEqual([v.generator for v in out], ["w8_linear_lanes", "w8_planes", "w8_linear"])
        self.assertEqual(out[1].params["stage"], "planes")  # in the registry row
        self.assertNotIn("stage", out[1].generator_params())  # not given to w8_planes, which it names
        self.assertIn("schedule", out[0].generator_params())

    def test_min_sm_and_device_follow_from_parameters(self) -> None:
        out = expand([{"schedule": "cuda_tiled", "tile": 64, "rows_per_thread": 8, "load_words": 4,
                       "encoder": "ptx", "types": "bf16_e5m2"}, {"schedule": "cpu", "types": "fp32"}],
                     "cast_transpose", {"generator": "cast_transpose"})
        self.assertEqual(out[0].name, "cast_transpose_bf16_e5m2_t64r8w4_cvt")
        self.assertEqual(out[0].settings, {"min_sm": "89"})
        self.assertEqual((out[1].name, out[1].device, out[1].settings), ("cast_transpose_fp32_cpu", "cpu", {}))

    def test_divide_variants_say_so_in_their_names(self) -> None:
        out = expand([{"scale_by": "divide", "schedule": "cuda_tiled", "tile": 64, "rows_per_thread": 8,
                       "load_words": 4, "encoder": "ptx", "types": "bf16_e5m2"},
                      {"scale_by": "divide", "schedule": "cpu", "outputs": "rows", "types": "fp16"},
                      {"scale_by": "divide", "schedule": "cuda_skinny", "long_dim": "m", "types": "fp32"},
                      {"scale_by": "multiply", "schedule": "cpu", "types": "fp32"}],
                     "cast_transpose", {"generator": "cast_transpose"})
        self.assertEqual([v.name for v in out], ["cast_transpose_bf16_e5m2_t64r8w4_cvt_divide",
                                                 "cast_transpose_fp16_rows_cpu_divide",
                                                 "cast_transpose_fp32_skinny_m_divide", "cast_transpose_fp32_cpu"])
        self.assertEqual(out[0].params["scale_by"], "divide")

    def test_settings_only_difference_shares_the_pipeline(self) -> None:
        out = expand([{"schedule": "cuda_words", "stage": "rescale", "types": "bf16_sbf16"},
                      {"schedule": "cuda_words", "stage": "rescale", "cublaslt_heuristic_rank": [0, 1],
                       "types": "bf16_sbf16"}])
        self.assertEqual([v.name for v in out], ["w8_linear_bf16_sbf16_dequant_cublas_rescale",
                                                 "w8_linear_bf16_sbf16_dequant_cublaslt_h0_rescale",
                                                 "w8_linear_bf16_sbf16_dequant_cublaslt_h1_rescale"])
        self.assertNotIn("kernels_of", out[0].settings)
        self.assertEqual([v.settings["kernels_of"] for v in out[1:]], [out[0].name] * 2)
        self.assertEqual(out[2].settings["cublaslt_heuristic_rank"], "1")

    def test_a_register_cap_apart_from_the_pipeline_it_shares_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "jit_max_registers"):
            expand([{"schedule": "cuda_words", "stage": "rescale", "types": "bf16_sbf16"},
                    {"schedule": "cuda_words", "stage": "rescale", "cublaslt_heuristic_rank": 0,
                     "jit_max_registers": 128, "types": "bf16_sbf16"}])

    def test_a_name_two_variants_would_share_is_refused(self) -> None:
        # warps is not in the GEMV's name: two variants apart only there would share one.
        with self.assertRaisesRegex(ValueError, "two variants derive the name"):
            expand([{"schedule": "cuda_gemv", "rows_per_warp": 2, "load_words": 8, "warps": [4, 8],
                     "types": "bf16_sbf16"}])

    def test_an_unknown_type_token_is_refused(self) -> None:
        with self.assertRaisesRegex(ValueError, "int4"):
            expand([{"schedule": "cuda_general", "types": "int4_sbf16"}])

    def test_the_list_names_its_types_as_its_tokens_say(self) -> None:
        spaces = json.loads(variants.SPACES.read_text())
        out = variants.expand(spaces)
        self.assertEqual(len({v.name for v in out}), len(out))
        for v in out:
            token = variants.type_token(v.params)
            parsed = variants.type_params(spaces["operators"][v.op], token) if token else {}
            self.assertEqual({k: v.params[k] for k in parsed}, parsed, v.name)
            self.assertIn(token, v.name)


if __name__ == "__main__":
    unittest.main()
