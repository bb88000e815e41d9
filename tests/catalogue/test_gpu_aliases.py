"""GPU names users and serving tools type resolve to the one catalogue entry they mean
(llm_analysis/catalogue/gpu_aliases.py); a name that could mean several boards stays an error listing them."""

from __future__ import annotations

import re

import pytest

from llm_analysis.catalogue.gpu_aliases import GPU_ALIASES
from llm_analysis.config import get_gpu_config_by_name, list_gpu_configs
from llm_analysis.errors import LLMAnalysisError


@pytest.mark.parametrize("alias", sorted(GPU_ALIASES))
def test_alias_names_an_entry_of_that_board(alias):
    target = GPU_ALIASES[alias]
    assert target in list_gpu_configs()
    # the entry is the board the alias names: its model designation leads the entry's name
    designation = re.sub(r"-(sxm|nvl72|nvl)$", "", alias)
    assert target.startswith(designation + "-"), (alias, target)
    assert get_gpu_config_by_name(alias).name == target


# aiconfigurator's system names (its systems/ folder, the serving rows' `system` column) and how users type
# boards: the board and its HBM capacity, from NVIDIA's spec sheets (H100 SXM 80 GB, H200 141 GB, B200 180 GB
# in DGX B200's 1,440 GB for eight; GB200 NVL72 186 GB per GPU: 13.4 TB for 72)
@pytest.mark.parametrize("typed, board, hbm_gb", [
    ("h100_sxm", "h100-sxm", 80), ("h200_sxm", "h200-sxm", 141), ("b200_sxm", "b200", 180),
    ("gb200", "gb200-nvl72", 186), ("H200", "h200-sxm", 141), ("B200", "b200", 180), ("RTX4090", "rtx-4090", 24),
])
def test_typed_names_resolve_to_the_board(typed, board, hbm_gb):
    gpu = get_gpu_config_by_name(typed)
    assert gpu.name == f"{board}-{hbm_gb}gb"


@pytest.mark.parametrize("ambiguous, candidates", [("h100", ("h100-sxm-80gb", "h100-pcie-80gb", "h100-nvl-94gb")),
                                                   ("a100", ("a100-sxm-80gb", "a100-sxm-40gb"))])
def test_a_name_of_several_boards_is_refused_with_them(ambiguous, candidates):
    with pytest.raises(LLMAnalysisError) as err:
        get_gpu_config_by_name(ambiguous)
    assert repr(ambiguous) in str(err.value)
    for c in candidates:
        assert c in str(err.value)


# NVIDIA's datasheets: the A100 80GB and the H100 (80 GB) each ship as an SXM module and a PCIe card (the A100
# datasheet's "A100 80GB PCIe" / "A100 80GB SXM" columns; the H100 datasheet's "H100 SXM" / "H100 PCIe"),
# so the memory without the form factor names two boards, as the model alone names several
@pytest.mark.parametrize("ambiguous, candidates", [("a100-80gb", ("a100-sxm-80gb", "a100-pcie-80gb")),
                                                   ("h100-80gb", ("h100-sxm-80gb", "h100-pcie-80gb")),
                                                   ("A100_40GB", ("a100-sxm-40gb", "a100-pcie-40gb"))])
def test_the_memory_without_the_form_factor_is_as_ambiguous(ambiguous, candidates):
    with pytest.raises(LLMAnalysisError) as err:
        get_gpu_config_by_name(ambiguous)
    assert "is ambiguous" in str(err.value) and "Unknown" not in str(err.value)
    listed = str(err.value).split("could mean ", 1)[1].split(";")[0].split(", ")
    assert sorted(listed) == sorted(candidates)


@pytest.mark.parametrize("typed, name", [
    ("H100-SXM-80GB", "h100-sxm-80gb"), ("a100-sxm-80GB", "a100-sxm-80gb"), ("h100_sxm_80gb", "h100-sxm-80gb"),
    ("TPU_V5P_95GB", "tpu-v5p-95gb"), ("rtx4090-24gb", "rtx-4090-24gb"),
    # one board by that name: the H100 PCIe card (80 GB, NVIDIA's H100 PCIe datasheet) and the MI100 (32 GB)
    ("h100-pcie", "h100-pcie-80gb"), ("H100_PCIE", "h100-pcie-80gb"), ("mi100", "mi100-32gb")])
def test_catalogue_names_are_spelt_forgivingly(typed, name):
    """The module's promise, case and '_' for '-', holds for the catalogue's own names too: 'H100-SXM-80GB' had
    been refused with 'Closest known names: h100-sxm-80gb' while 'H100-SXM' resolved."""
    assert get_gpu_config_by_name(typed).name == name


@pytest.mark.parametrize("typed,entry", [("H100 SXM", "h100-sxm-80gb"), ("h100 pcie", "h100-pcie-80gb"),
                                         ("rtx 4090", "rtx-4090-24gb"), ("GB200 NVL72", "gb200-nvl72-186gb")])
def test_names_with_spaces_are_spelt_forgivingly(typed, entry):
    """A space stands where the catalogue writes '-', as '_' does (datasheets write 'H100 SXM')."""
    assert get_gpu_config_by_name(typed).name == entry


def test_a_name_several_boards_begin_is_refused_as_ambiguous_listing_only_them():
    """'h100' is the SXM, the PCIe and the NVL card (80, 80, 94 GB): the refusal says so and lists those three,
    not the closest spellings of other GPUs (mi100, v100)."""
    from llm_analysis.errors import UnknownNameError
    with pytest.raises(UnknownNameError) as err:
        get_gpu_config_by_name("h100")
    message = str(err.value)
    assert "ambiguous" in message and all(b in message for b in ("h100-sxm-80gb", "h100-pcie-80gb", "h100-nvl-94gb"))
    assert "mi100" not in message and "v100" not in message
