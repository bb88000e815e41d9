"""LoRA / QLoRA: low-rank adapters on frozen base weights (Hu et al. 2021,
arXiv 2106.09685; Dettmers et al. 2023, arXiv 2305.14314)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from llm_analysis.errors import ConfigError
from llm_analysis.quantities.arguments import plain
from llm_analysis.schema.options import MAX_DIM, boolean, dtype_bytes, integer, string_list
from llm_analysis.model import Operator

# QLoRA NF4 storage (Dettmers et al. 2023, arXiv 2305.14314 §3): 4-bit codes, one
# fp32 absmax per 64 weights (0.5 bit/param); double quantization stores those
# as 8-bit with one fp32 constant per 256 of them: 8/64 + 32/(64*256) bits/param.
NF4_BITS_PER_PARAM_DOUBLE_QUANT = 4 + 8 / 64 + 32 / (64 * 256)
NF4_BITS_PER_PARAM = 4 + 32 / 64



@dataclass(frozen=True)
class LoRAConfig:
    """Low-rank adapters on frozen base weights.

    rank: r of A [in x r] and B [r x out].
    target_modules: projection ids, matched against each matmul record's
        `lora_target` (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj,
        down_proj; MLA: q_a_proj, q_b_proj, kv_a_proj, kv_b_proj). Routed and
        shared experts carry their projection's id, so up_proj adapts them too.
    base_weight_bits: 16 (LoRA) or 4 (QLoRA NF4) for the layers' linear weights.
    adapter_dtype_bytes: bytes of the adapter weights (and of their gradients).
    double_quant: QLoRA double quantization of the NF4 block constants.
    """

    rank: int = 8
    target_modules: Tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    base_weight_bits: int = 16
    adapter_dtype_bytes: float = 2
    double_quant: bool = True

    def __post_init__(self):
        for name in ("rank", "base_weight_bits", "adapter_dtype_bytes", "double_quant"):  # numpy scalars as numbers
            object.__setattr__(self, name, plain(getattr(self, name)))
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:  # no float ranks
            raise ConfigError(f"lora rank = {self.rank!r} must be a positive integer")
        if self.base_weight_bits not in (16, 4):
            raise ConfigError(f"lora base_weight_bits = {self.base_weight_bits!r}; valid: 16 (LoRA), 4 (QLoRA NF4)")
        object.__setattr__(self, "target_modules", string_list(self.target_modules, "lora target_modules"))
        object.__setattr__(self, "rank", integer(self.rank, "lora rank", 1, MAX_DIM))
        object.__setattr__(self, "adapter_dtype_bytes", dtype_bytes(self.adapter_dtype_bytes, "lora adapter_dtype_bytes"))
        # (read by truth: the string "false" or "no" was taken for True)
        object.__setattr__(self, "double_quant", boolean(self.double_quant, "lora double_quant"))

    @property
    def base_bytes_per_param(self) -> float:
        if self.base_weight_bits == 16:
            return 2.0
        return (NF4_BITS_PER_PARAM_DOUBLE_QUANT if self.double_quant else NF4_BITS_PER_PARAM) / 8

    def targets(self, op: Operator) -> bool:
        return op.kind == "matmul" and op.in_features > 0 and op.lora_target in self.target_modules

    @classmethod
    def from_any(cls, value: Any) -> Optional["LoRAConfig"]:
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"rank", "r", "target_modules", "base_weight_bits", "adapter_dtype_bytes",
                                    "double_quant"}
            if unknown:
                raise ConfigError(f"lora has unknown keys {sorted(unknown)}; valid: rank, target_modules, "
                                  "base_weight_bits, adapter_dtype_bytes, double_quant")
            v = dict(value)
            if "r" in v:
                v["rank"] = v.pop("r")
            return cls(**v)
        raise ConfigError(f"lora = {value!r} must be None, a dict or a LoRAConfig")



def lora_adapter_ops(op: Operator, rank: int, adapter_bytes: float, act_bytes: float) -> List[Operator]:
    """The A [in x r] and B [r x out] adapters of a (frozen) matmul record, for
    every weight matrix the record stands for (layers, experts, copies).

    FLOPs follow the base op's tokens: A does 2*T*in*r = base x r/out, B base x
    r/in. Per GPU they are split like the base weight. A re-reads the base input;
    B accumulates into the base output (read + write). The T x r intermediate is
    neglected (r << in, out)."""
    if not op.in_features or not op.out_features or not op.params:
        return []
    fin, fout = op.in_features, op.out_features
    n_mats = op.params // (fin * fout)  # biases add fewer than in*out params
    share = op.params_per_gpu / op.params
    in_bytes = op.bytes_read_per_gpu - op.weight_bytes_per_gpu
    out_bytes = op.bytes_written_per_gpu
    out = []
    for suffix, p_one, f_factor, read, write in (
            ("lora_A", fin * rank, rank / fout, in_bytes, 0.0),
            ("lora_B", rank * fout, rank / fin, out_bytes, out_bytes)):
        params = n_mats * p_one
        w_gpu = params * share * adapter_bytes
        out.append(Operator(name=f"{op.name}_{suffix}", group=op.group, kind="matmul", params=params,
                            params_per_gpu=params * share, weight_bytes_per_gpu=w_gpu,
                            flops=op.flops * f_factor, flops_per_gpu=op.flops_per_gpu * f_factor,
                            bytes_read_per_gpu=w_gpu + read, bytes_written_per_gpu=write,
                            shapes=f"r={rank} adapter of {op.name}"))
    return out

