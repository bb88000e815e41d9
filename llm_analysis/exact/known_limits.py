"""Why some architectures cannot be derived: structures whose FLOPs depend on the input
in a way no per-token, per-pair or per-sequence operator carries. The table only
explains refusals (found by config keys); it never refuses a model that verifies.
Torch-free.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

# (config keys that must all be present, explanation)
_LIMITS: Tuple[Tuple[Tuple[str, ...], str], ...] = (
    (("attention_window",),
     "sliding-chunk attention (Longformer, Beltagy et al. 2020, arXiv 2004.05150): transformers pads every "
     "input to a multiple of attention_window, so every projection runs on the padded tokens, and computes "
     "overlapping chunks of 2 x window/2 keys plus global tokens chosen by the input's values; the FLOPs are a "
     "step function of the length, which the exact path describes (architectures/longformer.py), but the "
     "global-token check reads values, impossible on meta tensors, so only a model small enough to run on the CPU "
     "is verified (cpu_verify.py)"),
    (("block_per_row", "approx_mode"),
     "multi-resolution approximate attention (MRA-2, Zeng et al. 2022, arXiv 2207.10284): transformers computes it "
     "only with CUDA kernels fetched from the Hub (kernels-community/mra) when a CUDA device is present; without "
     "them (on the CPU or on meta tensors) `mra2_attention` returns zeros at every input length, so the model "
     "computes no attention at all, and with them the block selection (top num_block of the (T/32)^2 "
     "low-resolution scores, num_block = min(max_position_embeddings/32 x block_per_row, "
     "(max_position_embeddings/32)^2)) and the sparse 32 x 32 block products run in custom ops FlopCounterMode "
     "has no formula for (they also need T a multiple of 32 with (T/32)^2 >= num_block, T >= 256 by default); "
     "neither path can be verified, so neither is described"),
    (("patching_mode", "patcher_config"),
     "entropy patching (BLT, Pagnoni et al. 2024, arXiv 2412.09871; patching_mode 'entropy', the default): a "
     "byte-level entropy model runs first and a patch starts wherever its next-byte entropy exceeds "
     "patching_threshold, so the number of patches the global transformer runs on, and the cross-attention "
     "between bytes and patches, depend on the input's values; the analysis has no input for the patch count, "
     "so the FLOPs cannot be stated (the meta-device forward fails at the same data-dependent step, and the "
     "model is too large to run on the CPU instead)"),
)


def known_limit(hf_config: Dict[str, Any]) -> Optional[str]:
    """The explanation of the first structure whose keys `hf_config` has, or None."""
    cfg = hf_config if isinstance(hf_config, dict) else {}
    for keys, why in _LIMITS:
        if all(cfg.get(k) is not None for k in keys):
            return why
    return None


def explained(message: str, hf_config: Dict[str, Any]) -> str:
    """`message` with the known structural limit of `hf_config` appended, if any."""
    why = known_limit(hf_config)
    return f"{message}\nWhy: {why}." if why else message
