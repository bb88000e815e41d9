"""HSDP sizes (PyTorch FSDP2 / torchtitan): `dp_shard` ranks share one sharded copy
of the model state, `dp_replicate` copies of it exist, dp_size = dp_shard x
dp_replicate. Used by `schema.ParallelismConfig` before its fields are validated."""

from __future__ import annotations

from typing import Any, Dict


def _divisors(n: int):
    return [d for d in range(1, n + 1) if n % d == 0] if isinstance(n, int) and 0 < n <= 1 << 20 else []


def hsdp_sizes(data: Dict[str, Any]) -> Dict[str, Any]:
    """`data` with dp_size, dp_shard and dp_replicate made consistent when either HSDP
    size is given (dp_size = their product when absent); ValueError if they disagree."""
    shard, rep = data.get("dp_shard"), data.get("dp_replicate")
    if shard is None and rep is None:
        return data
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (shard, rep) if v is not None):
        return data  # the field validators report the bad value
    dp = data.get("dp_size")
    if dp is None:
        dp = shard * rep if shard is not None and rep is not None else (shard or rep)
    if not isinstance(dp, int) or dp < 1:
        return data
    shard = shard if shard is not None else (dp // rep if dp % rep == 0 else 0)
    rep = rep if rep is not None else (dp // shard if shard and dp % shard == 0 else 0)
    if shard * rep != dp:
        raise ValueError(f"dp_shard = {data.get('dp_shard')} x dp_replicate = {data.get('dp_replicate')} must equal "
                         f"dp_size = {dp} (valid dp_shard: the divisors of {dp}: {_divisors(dp)})")
    return {**data, "dp_size": dp, "dp_shard": shard, "dp_replicate": rep}
