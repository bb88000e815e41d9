"""The exact path's refusals name the real limit of MRA and BLT (known_limits.py).

Torch-free: the explanation is chosen from the config.json keys. The facts it states
are checked against transformers' source in tests/test_exact_encoders.py (MRA's
attention is missing: FlopCounterMode counts no core) and by tests/exact_coverage.py.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from llm_analysis.exact.known_limits import explained, known_limit

TRUTH = json.loads(gzip.decompress((Path(__file__).resolve().parents[1] / "data" / "architecture_truth.json.gz").read_bytes()))["types"]


def test_mra_refusal_says_transformers_computes_its_attention_only_in_cuda_kernels():
    why = known_limit(TRUTH["mra"]["config"])
    assert "kernels-community/mra" in why and "returns zeros" in why and "2207.10284" in why


def test_blt_refusal_says_the_patches_depend_on_the_input_values():
    why = explained("blt: refused", TRUTH["blt"]["config"])
    assert why.startswith("blt: refused\nWhy: entropy patching")
    assert "patching_threshold" in why and "no input for the patch count" in why


def test_types_without_those_keys_get_no_explanation():
    assert known_limit(TRUTH["bert"]["config"]) is None
    assert known_limit(TRUTH["deepseek_v2"]["config"]) is None


def test_deepseek_v2_default_config_refusal_names_the_field_and_the_valid_values():
    # DeepSeek-V2's default config has 64 routed experts and num_experts_per_tok = None:
    # its parameters are defined, its FLOPs are not (transformers' topk(k=None) fails)
    import pytest
    transformers = pytest.importorskip("transformers")
    from llm_analysis.exact.derive_specs import missing_top_k
    why = missing_top_k(transformers.DeepseekV2Config())
    assert "num_experts_per_tok = None" in why and "from 1 to 64" in why
    assert missing_top_k(transformers.DeepseekV2Config(num_experts_per_tok=6)) is None
