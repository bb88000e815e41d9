"""Building blocks of the recurrent-mixer specs (derive path; torch-free helpers).

Shared by derive_mixers.py (RWKV, Griffin, MiniMax, Mamba, LFM, KDA),
derive_sconv_sites.py (short convolutions at any site of a layer) and
derive_mlstm.py (xLSTM's mLSTM cell). The spec fields are documented in
derive_mixers.py; how they become operators, in tree_mixers.py.
"""

from __future__ import annotations

from typing import Any, Dict, List

MIXER_GROUP = "attention"  # the layer's sequence-mixing block, as operators/mixers.py files it


def mixer_spec(name: str, op: str, params: int, calls: int, **extra: Any) -> Dict[str, Any]:
    """A spec with the fields every spec of a derived description carries."""
    s = {"name": name, "op": op, "params": int(params), "tokens": "all", "calls": int(calls), "group": MIXER_GROUP,
         "in": 0, "out": 0, "bias": False, "copies": 1, "expert_role": None, "tp": "unknown"}
    s.update(extra)
    return s


def elementwise_specs(rel: str, fresh: Dict[str, int], calls: int, group: str = MIXER_GROUP
                      ) -> List[Dict[str, Any]]:
    """One `param` spec per new parameter of the module (no FLOPs FlopCounterMode counts)."""
    return [mixer_spec(f"{rel}.{n}", "param", v, calls, group=group) for n, v in fresh.items()]


def state_spec(rel: str, calls: int, parts: List[List[Any]], paper: str, group: str = MIXER_GROUP
               ) -> Dict[str, Any]:
    """The state one sequence keeps in this module between decode steps:
    `parts` = [[name, elements, kept in float32]]."""
    return mixer_spec(f"{rel}.state", "state", 0, calls, group=group, parts=parts,
                      state_elems=int(sum(p[1] for p in parts)), decode_refusal=None, paper=paper)
