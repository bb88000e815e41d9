"""Which repeated module lists are the model's layer stacks, and which executions of them
train (used by `derive.py`; imports torch lazily).

Most models have one stack. HRM-Text (Wang et al., "Hierarchical Reasoning Model",
arXiv 2506.21734) runs a low-level stack `L_cycles` times within each of `H_cycles` runs
of a high-level one: every stack of the largest one's layer shape under the same parent
is a layer stack, and every execution (its own KV-cache slot) is a layer of the
description. Executions run without gradients (HRM's `L_bp_cycles`) refuse training.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from llm_analysis.exact.derive_specs import base_spec
from llm_analysis.exact.module_tree import breakdown, main_stack


def layer_stacks(lm: Any, calls: Dict[str, int]) -> List[str]:
    """The layer stacks' paths, in module order: the largest stack that runs (GIT's
    larger image encoder does not, in a text-only forward) and every stack with the
    same layer kinds under the same grandparent (HRM's L_module / H_module)."""
    shapes = [(n, tuple(p.shape)) for n, p in lm.named_parameters()]
    bd = breakdown(shapes)
    ran = {p: st for p, st in bd["stacks"].items() if any(c.startswith(p + ".") for c in calls)}
    bd = dict(bd, stacks=ran or bd["stacks"])
    main = main_stack(bd)
    if main is None:
        return []
    kinds = _kind_signature(bd["stacks"][main])
    parent = _grandparent(main)
    stacks = [p for p, st in bd["stacks"].items()
              if p == main or (_grandparent(p) == parent and "." in p and _kind_signature(st) == kinds)]
    order = [name for name, _ in lm.named_modules()]
    return sorted(stacks, key=order.index)


def _kind_signature(stack: Dict[str, Any]) -> List[Any]:
    return [(k["params"], len(k["indices"])) for k in stack["kinds"]]


def _grandparent(path: str) -> str:
    return path.rsplit(".", 2)[0] if path.count(".") >= 2 else ""


def inside_any(path: str, stacks: List[str]) -> bool:
    return any(path == s or path.startswith(s + ".") for s in stacks)


def forward_only_layers(lm: Any, layers: List[str], batch: int = 1, seq_len: int = 4) -> Tuple[int, int]:
    """(executions without gradients, executions) of `layers` in one forward with
    gradients enabled (meta tensors: no arithmetic, no memory)."""
    import torch

    from llm_analysis.exact.flops import forward_only
    from llm_analysis.exact.probe import _masks_built_without_reading_values
    grad: List[bool] = []
    handles = [lm.get_submodule(p).register_forward_pre_hook(lambda *_: grad.append(torch.is_grad_enabled()))
               for p in layers]
    ids = torch.zeros(batch, seq_len, dtype=torch.long, device="meta")
    try:
        with torch.enable_grad(), forward_only(), _masks_built_without_reading_values():
            lm(input_ids=ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return sum(1 for g in grad if not g), len(grad)


def refused_phases(lm: Any, layers: List[str], order: List[List[Any]]) -> Dict[str, str]:
    """{"train": reason} when some layer executions run without gradients; checked
    only for models that run a layer more than once (the others have one execution
    per layer, and no model runs its only one without gradients)."""
    if all(owns for _, owns in order):
        return {}
    try:
        frozen, runs = forward_only_layers(lm, layers)
    except Exception as exc:  # noqa: BLE001 - the model code on meta tensors with gradients
        return {"train": f"{type(lm).__name__} runs some layers several times and could not be run with "
                         f"gradients on meta tensors to check which executions train ({type(exc).__name__})"}
    if not frozen:
        return {}
    return {"train": f"{type(lm).__name__} runs {frozen} of its {runs} layer executions without gradients "
                     "(torch.no_grad inside its forward), so a training step's backward pass covers only "
                     "some of them; the exact path describes no forward-only layer execution"}


# ------------------------------------------------------------------ idle modules
# A multimodal model's causal-LM class may hold encoders that a text-only forward
# never runs (GIT's image encoder, Phi-4-multimodal's image and audio embedders) and
# layers that run only with image features (Mllama's cross-attention layers skip
# their whole block without them). The analysis feeds text tokens, so such a module
# is described by what it is in that forward: parameters (weight memory), no FLOPs
# and no bytes moved. Only whole modules with children count as idle: a leaf
# projection that is never called may have its weight used by its parent (a head
# multiplying by `self.lm_head.weight`), and keeps its usual reading.


def idle_roots(lm: Any, calls: Dict[str, int]) -> List[str]:
    """Paths of the topmost modules that never ran in the probe and have children
    (the model itself excluded)."""
    roots: List[str] = []
    for path, module in lm.named_modules():
        if not path or path in calls or any(path.startswith(r + ".") for r in roots):
            continue
        if any(True for _ in module.children()) and not any(p.startswith(path + ".") for p in calls):
            roots.append(path)
    return roots


def idle_spec(name: str, module: Any, seen: set) -> Dict[str, Any]:
    """One `param` spec holding the new parameters of `module`'s whole subtree, marked
    idle (no bytes read: tree_describer)."""
    params = 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            params += int(p.numel())
    return dict(base_spec(name, "param", params, "none", 0, "other"), idle=True)
