"""The shipped GPU and data-type catalogues.

Every file loads through the public API; GPUs with a `gpu_spec` record in the shared
validation set (vendor spec sheets, cited by record id) are compared to it; the rest
of the checks are invariants derived by hand from how the hardware works (dense
peaks are half the 2:4-sparse ones, fp8 runs at twice the fp16 tensor rate, PCIe
GenN x16 moves ~2**(N-4) * 32 GB/s per direction, ...), never our own output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from llm_analysis.config import (
    DTYPE_CONFIGS_DIR,
    GPU_CONFIGS_DIR,
    DtypeConfig,
    GPUConfig,
    get_dtype_config_by_name,
    get_gpu_config_by_name,
    list_dtype_configs,
    list_gpu_configs,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
MEASUREMENTS = REPO_ROOT / "benchmarks" / "data" / "validation" / "published_measurements.json"

# the mirrored system's catalogue, and the GPUs added here
MIRRORED_GPUS = """a10-pcie-28gb a100-pcie-40gb a100-pcie-80gb a100-sxm-40gb a100-sxm-80gb a10g-pcie-24gb
    a6000-48gb h100-pcie-80gb h100-sxm-80gb mi100-32gb mi210-64gb mi250-128gb mi250x-128gb
    v100-pcie-16gb v100-pcie-32gb v100-sxm-16gb v100-sxm-32gb""".split()
NEW_GPUS = """t4-16gb a40-48gb l4-24gb l40s-48gb h100-nvl-94gb h200-sxm-141gb b200-180gb
    mi300x-192gb mi325x-256gb rtx-4090-24gb""".split()
# issue 11: rack-scale Blackwell, Blackwell Ultra, H20, CDNA 4 and TPUs
SETUP_GPUS = """gb200-nvl72-186gb gb300-nvl72-279gb b300-270gb h20-96gb mi355x-288gb tpu-v4-32gb
    tpu-v5e-16gb tpu-v5p-95gb tpu-v6e-32gb""".split()
ALL_GPUS = MIRRORED_GPUS + NEW_GPUS + SETUP_GPUS

MIRRORED_DTYPES = """w16a16e16 w16a16e32 w4a16e16 w4a16e32 w4a4e16 w4a4e32 w4a8e16 w4a8e32 w8a16e16
    w8a16e32 w8a8e16 w8a8e32""".split()
NEW_DTYPES = ["fp8", "w8a8e16-fp8", "w8a16e16-fp8", "w32a32e32", "w4a16e16-g128"]
FP4_DTYPES = ["nvfp4", "mxfp4", "w4a4e16-nvfp4", "w4a16e16-nvfp4", "w4a4e16-mxfp4", "w4a16e16-mxfp4",
              "w4a8e16-mxfp4"]
ALL_DTYPES = MIRRORED_DTYPES + NEW_DTYPES

# Hardware with fp8 tensor cores: Hopper, Ada, Blackwell, CDNA3.
FP8_GPUS = {"h100-pcie-80gb", "h100-sxm-80gb", "h100-nvl-94gb", "h200-sxm-141gb", "b200-180gb",
            "l4-24gb", "l40s-48gb", "rtx-4090-24gb", "mi300x-192gb", "mi325x-256gb", "h20-96gb",
            "gb200-nvl72-186gb", "gb300-nvl72-279gb", "b300-270gb", "mi355x-288gb"}
# TPU v5p runs fp8 at the bf16 rate (Cloud TPU v5p spec table: 459 bf16, 459 fp8)
FP8_AT_16BIT_RATE = {"tpu-v5p-95gb"}
# No integer tensor units (peak 0): Volta (V100 datasheet; the mirrored system's files say 0)
NO_INT_GPUS = {"v100-pcie-16gb", "v100-pcie-32gb", "v100-sxm-16gb", "v100-sxm-32gb"}
# Blackwell Ultra cut INT8 below the BF16 rate (HGX B300: INT8 2 POPS* vs BF16 36 PF*)
INT8_BELOW_FP16 = {"b300-270gb", "gb300-nvl72-279gb"}
# Hardware without a bf16 tensor path: Volta, Turing.
NO_BF16_GPUS = {"v100-pcie-16gb", "v100-pcie-32gb", "v100-sxm-16gb", "v100-sxm-32gb", "t4-16gb"}
# Name suffix that is not the memory: the mirrored system named the 24 GB A10 "28gb".
MEMORY_NOT_IN_NAME = {"a10-pcie-28gb": 24}

# Spec sheets print HBM capacity in binary units: HBM stacks are built of power-of-two DRAM
# dies (e.g. an A100 80GB has five 16 GiB stacks; deviceQuery on an A100 40GB reports
# 42405855232 bytes, 1.3% under 40 GiB and 6% over 40e9), so the catalogue's decimal GB is the
# spec figure x 2**30 / 1e9. GDDR boards lose part of their capacity to ECC and keep the printed
# figure. Every catalogue GPU not listed here carries HBM.
GDDR_GPUS = {"a10-pcie-28gb", "a10g-pcie-24gb", "a40-48gb", "a6000-48gb", "l4-24gb", "l40s-48gb",
             "rtx-4090-24gb", "t4-16gb"}
# GDDR6 boards whose ECC is on by default (NVIDIA datasheets: "GDDR6 with ECC"): the driver hands out
# 15/16 of the DRAM (nvidia-smi on an A10: 23028 MiB of 24 GiB; a T4: 15360 MiB of 16 GiB)
ECC_ON_GDDR_GPUS = {"a10-pcie-28gb", "a10g-pcie-24gb", "a40-48gb", "l4-24gb", "l40s-48gb", "t4-16gb"}


def spec_sheet_gb(name: str, catalogue_gib: float) -> float:
    """The capacity the spec sheet prints, from the catalogue's GiB (mem_per_GPU_in_GB is read x 1024**3,
    as the mirrored system reads it: the sheet's figure itself, less ECC's 1/16 where ECC is on)."""
    return round(catalogue_gib * 16 / 15, 1) if name in ECC_ON_GDDR_GPUS else catalogue_gib

# gpu_spec record id -> catalogue names it describes
RECORD_TO_GPUS = {
    "gpu-v100-sxm2": ["v100-sxm-16gb", "v100-sxm-32gb"],
    "gpu-v100-pcie": ["v100-pcie-16gb", "v100-pcie-32gb"],
    "gpu-t4": ["t4-16gb"],
    "gpu-a10": ["a10-pcie-28gb"],
    "gpu-a10g": ["a10g-pcie-24gb"],
    "gpu-a40": ["a40-48gb"],
    "gpu-a100-40gb-sxm": ["a100-sxm-40gb"],
    "gpu-a100-80gb-sxm": ["a100-sxm-80gb"],
    "gpu-a100-80gb-pcie": ["a100-pcie-80gb"],
    "gpu-l4": ["l4-24gb"],
    "gpu-l40s": ["l40s-48gb"],
    "gpu-h100-sxm": ["h100-sxm-80gb"],
    "gpu-h100-pcie": ["h100-pcie-80gb"],
    "gpu-h100-nvl": ["h100-nvl-94gb"],
    "gpu-h200-sxm": ["h200-sxm-141gb"],
    "gpu-b200": ["b200-180gb"],
    "gpu-mi250x": ["mi250x-128gb"],
    "gpu-mi300x": ["mi300x-192gb"],
    "gpu-mi325x": ["mi325x-256gb"],
    "gpu-rtx-4090": ["rtx-4090-24gb"],
}

# record field -> GPUConfig field (dense figures only)
RECORD_FIELDS = {
    "mem_bw_gb_s": "hbm_bandwidth_in_GB_per_sec",
    "fp16_tensor_tflops_dense": "peak_fp16_TFLOPS",
    "fp16_bf16_tensor_tflops_dense": ("peak_fp16_TFLOPS", "peak_bf16_TFLOPS"),
    "fp16_bf16_matrix_tflops_dense": ("peak_fp16_TFLOPS", "peak_bf16_TFLOPS"),
    # GeForce Ada: LLM kernels accumulate in fp32, the rate we use
    "fp16_tensor_tflops_dense_fp32_accum": ("peak_fp16_TFLOPS",),
    "fp8_tflops_dense": "peak_fp8_TFLOPS",
    "fp8_tflops_dense_fp32_accum": "peak_fp8_TFLOPS",
    "tf32_tflops_dense": "peak_tf32_TFLOPS",
    "int8_tops_dense": "peak_i8_TFLOPS",
    "int4_tops_dense": "peak_i4_TFLOPS",
    "fp32_tflops": "peak_fp32_TFLOPS",
}
REL = 0.005  # spec sheets round to 3-4 significant digits


def _records() -> dict:
    if not MEASUREMENTS.is_file():
        pytest.skip(f"shared validation set not present ({MEASUREMENTS.name})")
    data = json.loads(MEASUREMENTS.read_text())
    return {r["id"]: r for r in data if r.get("kind") == "gpu_spec"}


def _gpu(name: str) -> GPUConfig:
    return get_gpu_config_by_name(name)


# --- every file loads --------------------------------------------------------

def test_every_required_gpu_is_shipped():
    missing = sorted(set(ALL_GPUS) - set(list_gpu_configs()))
    assert not missing, f"GPU catalogue lacks {missing}"


@pytest.mark.parametrize("path", sorted(GPU_CONFIGS_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_gpu_file_loads_by_name_and_by_path(path):
    by_name = get_gpu_config_by_name(path.stem)
    assert isinstance(by_name, GPUConfig)
    assert by_name.name == path.stem
    assert get_gpu_config_by_name(str(path)) == by_name
    assert by_name.source.strip(), f"{path.name}: `source` must cite the spec sheet"
    # a lookup hands out a copy: changing it does not change the catalogue
    by_name.peak_fp16_TFLOPS = -1.0
    assert get_gpu_config_by_name(path.stem).peak_fp16_TFLOPS > 0


def test_every_required_dtype_is_shipped():
    missing = sorted(set(ALL_DTYPES) - set(list_dtype_configs()))
    assert not missing, f"dtype catalogue lacks {missing}"


@pytest.mark.parametrize("path", sorted(DTYPE_CONFIGS_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_dtype_file_loads_by_name_and_by_path(path):
    by_name = get_dtype_config_by_name(path.stem)
    assert isinstance(by_name, DtypeConfig)
    assert by_name.name == path.stem
    assert get_dtype_config_by_name(str(path)) == by_name


# --- GPUs against the published spec records ----------------------------------

def test_record_mapping_covers_known_records():
    """Every gpu_spec record either maps to catalogue entries or is knowingly left out."""
    records = _records()
    not_shipped = {"gpu-h200-nvl", "gpu-gb200"}
    unmapped = sorted(set(records) - set(RECORD_TO_GPUS) - not_shipped)
    assert not unmapped, f"gpu_spec records without a catalogue mapping: {unmapped}"


@pytest.mark.parametrize("record_id,name",
                         [(r, n) for r, names in RECORD_TO_GPUS.items() for n in names])
def test_gpu_matches_spec_record(record_id, name):
    records = _records()
    if record_id not in records:
        pytest.skip(f"record {record_id} not in the validation set")
    rec = records[record_id]
    m = rec["measured"]
    gpu = _gpu(name)
    where = f"{name} vs {record_id} ({rec['status']}; {rec['source'][:80]}...)"

    mem = m["memory_gb"]
    printed_gb = spec_sheet_gb(name, gpu.mem_per_GPU_in_GB)
    if isinstance(mem, list):
        assert printed_gb in mem, where
        assert printed_gb == int(re.search(r"-(\d+)gb$", name).group(1)), where
    else:
        assert printed_gb == pytest.approx(mem, rel=REL), where

    compared = 0
    for key, fields in RECORD_FIELDS.items():
        if key not in m:
            continue
        for field in (fields,) if isinstance(fields, str) else fields:
            got = getattr(gpu, field)
            assert got is not None, f"{where}: {field} unset but the record gives {key}={m[key]}"
            assert got == pytest.approx(m[key], rel=REL), f"{where}: {field}={got} vs {key}={m[key]}"
            compared += 1
    assert compared or record_id == "gpu-a10g", f"{where}: nothing compared"

    if m.get("bf16_supported") is False:
        assert gpu.peak_bf16_TFLOPS is None, where
    if m.get("fp8_supported") is False:
        assert gpu.peak_fp8_TFLOPS is None, where
    # NVLink / Infinity Fabric: the record gives the bidirectional figure per GPU
    if "nvlink_gb_s_bidir" in m and m.get("nvlink") is not False:
        assert gpu.intra_node_link == "nvlink", where
        assert gpu.intra_node_bandwidth_in_GB_per_sec == pytest.approx(m["nvlink_gb_s_bidir"] / 2), where
    if "infinity_fabric_gb_s" in m:
        assert gpu.intra_node_link == "xgmi", where
        assert gpu.intra_node_bandwidth_in_GB_per_sec == pytest.approx(m["infinity_fabric_gb_s"] / 2), where
    if m.get("nvlink") is False:
        assert gpu.intra_node_link == "pcie", where
    # PCIe GenN x16: 2**(N-4) * 32 GB/s per direction (Gen4: 16 GT/s x 16 lanes, 128b/130b ~ 31.5)
    if "pcie_gen" in m:
        assert gpu.pcie_bandwidth_in_GB_per_sec == pytest.approx(2 ** (m["pcie_gen"] - 4) * 32), where
    assert record_id in gpu.source, f"{name}: `source` should cite the record {record_id}"


def test_dense_peaks_below_sparse_figures():
    """Spec sheets print 2:4-sparsity peaks; the catalogue must hold the dense ones."""
    records = _records()
    precisions = {"fp16": "peak_fp16_TFLOPS", "fp8": "peak_fp8_TFLOPS", "int8": "peak_i8_TFLOPS",
                  "tf32": "peak_tf32_TFLOPS"}
    checked = 0
    for record_id, names in RECORD_TO_GPUS.items():
        m = records.get(record_id, {}).get("measured", {})
        for key, value in m.items():
            if "sparse" not in key:
                continue
            field = precisions.get(key.split("_")[0])
            if field is None:
                continue
            for name in names:
                dense = getattr(_gpu(name), field)
                assert dense is not None and dense < value, (
                    f"{name}.{field} = {dense} is not below the sparse figure {key} = {value} ({record_id})")
                # and it is the dense figure, half the sparse one (L40S prints 362.05 | 733)
                assert dense == pytest.approx(value / 2, rel=0.02), (name, field, key, value)
                checked += 1
    assert checked >= 10


# --- invariants of the catalogue -------------------------------------------------

@pytest.mark.parametrize("name", ALL_GPUS)
def test_gpu_invariants(name):
    g = _gpu(name)
    if name in NO_INT_GPUS:
        assert g.peak_i8_TFLOPS == g.peak_i4_TFLOPS == 0, name
    elif name in INT8_BELOW_FP16:
        assert 0 < g.peak_i8_TFLOPS < g.peak_fp16_TFLOPS / 10, name
    else:
        assert g.peak_i8_TFLOPS >= g.peak_fp16_TFLOPS, name
    assert g.peak_i4_TFLOPS >= g.peak_i8_TFLOPS, name
    for f in ("peak_bf16_TFLOPS", "peak_tf32_TFLOPS", "peak_fp32_TFLOPS"):
        v = getattr(g, f)
        assert v is None or v <= g.peak_fp16_TFLOPS, (name, f, v)
    if name in NO_BF16_GPUS:
        assert g.peak_bf16_TFLOPS is None, name
    else:
        assert g.peak_bf16_TFLOPS is not None, name
    if name in FP8_GPUS:
        # fp8 tensor cores run at twice the 16-bit rate on Hopper, Ada, Blackwell and CDNA3/4
        assert g.peak_fp8_TFLOPS == pytest.approx(2 * g.peak_fp16_TFLOPS, rel=0.03), name
    elif name in FP8_AT_16BIT_RATE:
        assert g.peak_fp8_TFLOPS == g.peak_fp16_TFLOPS, name
    else:
        assert g.peak_fp8_TFLOPS is None, name
    expected_mem = MEMORY_NOT_IN_NAME.get(name) or int(re.search(r"-(\d+)gb$", name).group(1))
    assert spec_sheet_gb(name, g.mem_per_GPU_in_GB) == expected_mem, name
    assert g.memory_bytes == g.mem_per_GPU_in_GB * 2**30, name  # the mirrored system's reading
    if g.intra_node_link == "pcie":
        assert g.intra_node_bandwidth_in_GB_per_sec == g.pcie_bandwidth_in_GB_per_sec, name
    else:
        assert g.intra_node_bandwidth_in_GB_per_sec > g.pcie_bandwidth_in_GB_per_sec, name
    assert g.num_gpus_per_node % g.fast_link_group_size == 0, name
    assert g.nvlink_domain_size % g.fast_link_group_size == 0, name
    if g.peak_fp4_TFLOPS is not None:  # FP4 runs at 2x (Blackwell, CDNA 4) or 3x (Blackwell Ultra) fp8
        assert 2 * g.peak_fp8_TFLOPS * 0.9999 <= g.peak_fp4_TFLOPS <= 3 * g.peak_fp8_TFLOPS * 1.0001, name
    # per GPU per direction: 800 Gb/s = 100 GB/s is the fastest NIC a GPU gets
    assert 0 < g.inter_node_bandwidth_in_GB_per_sec <= 100, name
    assert g.intra_node_min_message_latency == pytest.approx(8e-06), name


def test_a40_nvlink_bridge_joins_pairs():
    # A40 datasheet: NVLink bridge, 112.5 GB/s bidirectional, 2 GPUs
    g = _gpu("a40-48gb")
    assert g.intra_node_link == "nvlink"
    assert g.fast_link_group_size == 2
    assert g.intra_node_bandwidth_in_GB_per_sec == pytest.approx(112.5 / 2)
    assert g.pcie_bandwidth_in_GB_per_sec == pytest.approx(32)


def test_sxm_nvlink_per_direction():
    # NVLink3 12 links x 50 GB/s = 600 bidirectional; NVLink4 18 x 50 = 900
    assert _gpu("a100-sxm-80gb").intra_node_bandwidth_in_GB_per_sec == 600 / 2
    assert _gpu("h100-sxm-80gb").intra_node_bandwidth_in_GB_per_sec == 900 / 2
    assert _gpu("a100-sxm-80gb").fast_link_group_size == 8


# --- data types ----------------------------------------------------------------

@pytest.mark.parametrize("name", FP4_DTYPES)
def test_fp4_dtype_files(name):
    d = get_dtype_config_by_name(name)
    fmt = "nvfp4" if "nvfp4" in name else "mxfp4"
    assert d.weight_bits == 4 and d.weight_format == fmt and d.embedding_bits == 16
    assert d.source.strip(), "every FP4 dtype file cites its format"
    # NVFP4: one 8-bit scale per 16 values; MXFP4: one per 32 (OCP MX v1.0)
    assert (d.quant_group_size, d.quant_scale_bits) == ((16, 8) if fmt == "nvfp4" else (32, 8))
    if d.activation_bits == 4:
        assert d.activation_format == fmt


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_dtype_bits_follow_the_name(name):
    d = get_dtype_config_by_name(name)
    if name == "fp8":
        bits = (8, 8, 16)
    else:
        bits = tuple(int(x) for x in re.match(r"w(\d+)a(\d+)e(\d+)", name).groups())
    assert (d.weight_bits, d.activation_bits, d.embedding_bits) == bits
    is_fp8 = name == "fp8" or name.endswith("-fp8")
    assert d.weight_format == ("float" if is_fp8 or d.weight_bits >= 16 else "int")
    assert d.activation_format == ("float" if is_fp8 or d.activation_bits >= 16 else "int")


def test_fp8_differs_from_int8():
    fp8, alias, int8 = (get_dtype_config_by_name(n) for n in ("fp8", "w8a8e16-fp8", "w8a8e16"))
    assert fp8.model_dump(exclude={"name"}) == alias.model_dump(exclude={"name"})
    assert (fp8.weight_bits, fp8.activation_bits) == (int8.weight_bits, int8.activation_bits) == (8, 8)
    assert (fp8.weight_format, fp8.activation_format) == ("float", "float")
    assert (int8.weight_format, int8.activation_format) == ("int", "int")
    assert fp8 != int8
    w8 = get_dtype_config_by_name("w8a16e16-fp8")
    assert (w8.weight_format, w8.activation_bits) == ("float", 16)


def test_weight_bytes_per_param():
    # hand derivation: bits / 8, plus one 16-bit scale per 128 weights for the grouped format
    assert get_dtype_config_by_name("w16a16e16").weight_bytes_per_param == 2
    assert get_dtype_config_by_name("w32a32e32").weight_bytes_per_param == 4
    assert get_dtype_config_by_name("w4a16e16").weight_bytes_per_param == 0.5
    g128 = get_dtype_config_by_name("w4a16e16-g128")
    # AutoAWQ's GEMM checkpoint of a [K x N] linear: qweight K x N / 8 int32 (4 bits a weight), scales
    # K/128 x N fp16 and qzeros K/128 x N / 8 int32 (a 4-bit zero point a group and column): 16 + 4 bits a group
    assert (g128.quant_group_size, g128.quant_scale_bits) == (128, 20)
    assert g128.weight_bytes_per_param == pytest.approx((4 + (16 + 4) / 128) / 8)
    k, n = 4096, 14336
    awq_bytes = k * n // 8 * 4 + (k // 128) * n * 2 + (k // 128) * n // 8 * 4
    assert g128.weight_bytes_per_param * k * n == pytest.approx(awq_bytes, rel=1e-12)
