"""The GPU names users and serving tools type (`b200`, `h200_sxm`, `gb200`) and the catalogue entry each
stands for.

The catalogue names a GPU by model, form factor and memory (`h100-sxm-80gb`). A shorter name resolves only
where it can mean one entry: `b200` is the one B200 board, but `h100` could be the SXM, PCIe or NVL card,
`a100` the 40 or 80 GB one and `a100-80gb` the SXM or PCIe one, so those stay errors that list the candidates. aiconfigurator names its systems
`h100_sxm`, `h200_sxm`, `b200_sxm`, `b300_sxm`, `gb200`, `gb300` (its systems/ folder; the serving
validation rows' `system` column): each is one entry here (a GB200 / GB300 "system" is the NVL72 rack).
Spelling is forgiving: case, `_` for `-`, and `rtx4090` for `rtx-4090`.
"""

from __future__ import annotations

import re
from typing import Dict, Optional

from llm_analysis.errors import UnknownNameError

# alias (normalised: lower case, '_' as '-') -> catalogue GPU name
GPU_ALIASES: Dict[str, str] = {
    # aiconfigurator's system names
    "h100-sxm": "h100-sxm-80gb", "h200-sxm": "h200-sxm-141gb", "b200-sxm": "b200-180gb", "b300-sxm": "b300-270gb",
    "gb200": "gb200-nvl72-186gb", "gb300": "gb300-nvl72-279gb",
    # one board by that name
    "h200": "h200-sxm-141gb", "b200": "b200-180gb", "b300": "b300-270gb", "h20": "h20-96gb",
    "gb200-nvl72": "gb200-nvl72-186gb", "gb300-nvl72": "gb300-nvl72-279gb",
    "h100-nvl": "h100-nvl-94gb", "h100-pcie": "h100-pcie-80gb", "mi100": "mi100-32gb", "l4": "l4-24gb", "l40s": "l40s-48gb", "a40": "a40-48gb", "a6000": "a6000-48gb",
    "a10": "a10-pcie-28gb", "a10g": "a10g-pcie-24gb", "t4": "t4-16gb", "rtx-4090": "rtx-4090-24gb",
    "mi210": "mi210-64gb", "mi250": "mi250-128gb", "mi250x": "mi250x-128gb", "mi300x": "mi300x-192gb",
    "mi325x": "mi325x-256gb", "mi355x": "mi355x-288gb",
    "tpu-v4": "tpu-v4-32gb", "tpu-v5e": "tpu-v5e-16gb", "tpu-v5p": "tpu-v5p-95gb", "tpu-v6e": "tpu-v6e-32gb",
}


def _normalised(name: str) -> str:
    key = re.sub(r"[\s_]+", "-", name.strip().lower())  # 'H100 SXM', 'h100_sxm': h100-sxm
    return re.sub(r"^rtx(?=\d)", "rtx-", key)  # rtx4090 -> rtx-4090


def _names_part_of(key: str, board: str) -> bool:
    """Whether `key` names the board `board` with parts left out: the same model (first part) and its other
    parts in order among the board's (`h100` and `h100-80gb` both name h100-sxm-80gb and h100-pcie-80gb: the
    memory without the form factor is as ambiguous as the model alone, and had read as an unknown name)."""
    want, have = key.split("-"), board.split("-")
    if want == have or want[0] != have[0]:
        return False
    rest = iter(have[1:])
    return all(part in rest for part in want[1:])


def resolve_gpu_alias(name: str, catalogue_names=()) -> Optional[str]:
    """The catalogue name `name` stands for, or None when it is no alias: an alias above, or one of
    `catalogue_names` spelt forgivingly (`H100-SXM-80GB`, `h100_sxm_80gb`, `H100 SXM`). A name that names
    several entries with parts left out and is no alias (`h100`: the SXM, PCIe and NVL cards; `a100-80gb`: the
    SXM and PCIe 80 GB cards) is refused as ambiguous, listing them."""
    key = _normalised(name)
    if key in GPU_ALIASES:
        return GPU_ALIASES[key]
    found = next((n for n in catalogue_names if _normalised(n) == key), None)
    if found is None and key:
        boards = sorted(n for n in catalogue_names if _names_part_of(key, _normalised(n)))
        if len(boards) > 1:
            raise UnknownNameError(f"gpu name {name!r} is ambiguous: it could mean {', '.join(boards)}; give one of "
                                   "those names")
    return found


__all__ = ["GPU_ALIASES", "resolve_gpu_alias"]
