"""Constants shared by the analysis: data-type sizes, unit factors and defaults.

Units: memory sizes in the catalogues are decimal gigabytes (1 GB = 10**9 bytes),
as printed on vendor spec sheets; bandwidths are decimal GB/s; compute peaks are
dense (non-sparse) TFLOP/s (10**12 FLOP/s).
"""

import re

from llm_analysis.errors import ConfigError

BYTES_FP32 = 4

GB = 10**9  # decimal gigabyte, the unit of bandwidths and of reported sizes
GiB = 2**30  # binary gigabyte, the unit of mem_per_GPU_in_GB (as the mirrored system reads it)
TFLOPS = 10**12

# Efficiencies default to 1: the model then gives a lower bound on time
# (the hardware can never beat its own peak).
HBM_MEMORY_EFFICIENCY = 1.0
INTRA_NODE_MEMORY_EFFICIENCY = 1.0
INTER_NODE_MEMORY_EFFICIENCY = 1.0

NUM_GPUS_PER_NODE = 8

# Adam keeps momentum and variance in fp32: 4 + 4 bytes per parameter
# (Kingma & Ba 2015, arXiv 1412.6980), on top of the fp32 master weights.
ADAM_OPTIMIZER_STATE_BYTES = 8

# ANSI sequence-free log format for the CLI.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"

# Time flags accept a unit (`500ms`, `0.5s`, `2min`); a bare number is seconds.
TIME_UNITS_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}


def seconds(value, field: str):
    """`value` in seconds: None, a number (seconds) or a string with a unit of TIME_UNITS_S.
    Raises ConfigError naming `field`, the value and the valid units."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = m.group(2).lower() if m else None
    if not m or (unit and unit not in TIME_UNITS_S):
        raise ConfigError(f"{field} = {value!r} is not a time: give a number of seconds or a number with a unit "
                          f"({', '.join(TIME_UNITS_S)}), e.g. 500ms or 0.5s")
    return float(m.group(1)) * (TIME_UNITS_S[unit] if unit else 1.0)
