"""Constants shared by the analysis: data-type sizes, unit factors and defaults.

Units: memory sizes in the catalogues are decimal gigabytes (1 GB = 10**9 bytes),
as printed on vendor spec sheets; bandwidths are decimal GB/s; compute peaks are
dense (non-sparse) TFLOP/s (10**12 FLOP/s).
"""

BYTES_FP32 = 4
BYTES_FP16 = 2
BYTES_INT8 = 1
BYTES_INT4 = 0.5

GB = 10**9  # decimal gigabyte, the unit of mem_per_GPU_in_GB and of bandwidths
TFLOPS = 10**12
MB = 10**6
KB = 10**3

# Efficiencies default to 1: the model then gives a lower bound on time
# (the hardware can never beat its own peak).
FLOPS_EFFICIENCY = 1.0
HBM_MEMORY_EFFICIENCY = 1.0
INTRA_NODE_MEMORY_EFFICIENCY = 1.0
INTER_NODE_MEMORY_EFFICIENCY = 1.0

NUM_GPUS_PER_NODE = 8

# Adam keeps momentum and variance in fp32: 4 + 4 bytes per parameter
# (Kingma & Ba 2015, arXiv 1412.6980), on top of the fp32 master weights.
ADAM_OPTIMIZER_STATE_BYTES = 8

# ANSI sequence-free log format for the CLI.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
