"""The `update_*` methods of `LLMAnalysis` (names of the mirrored API): each sets
one input and drops everything derived from it (`_reset`)."""

from __future__ import annotations

from llm_analysis.config import DtypeConfig, GPUConfig, ModelConfig, ParallelismConfig
from llm_analysis.schema.options import efficiency as _efficiency


class ConfigUpdates:
    """Mixin of LLMAnalysis; `_reset` is the facade's."""

    def update_model_config(self, model_config: ModelConfig) -> None:
        self.model_config = model_config
        self._reset()

    def update_gpu_config(self, gpu_config: GPUConfig) -> None:
        self.gpu_config = gpu_config
        self._reset()

    def update_dtype_config(self, dtype_config: DtypeConfig) -> None:
        self.dtype_config = dtype_config
        self._reset()

    def update_parallelism_config(self, parallelism_config: ParallelismConfig) -> None:
        self.parallelism_config = parallelism_config
        self._reset()

    def update_float_efficiency(self, flops_efficiency: float) -> None:
        self.flops_efficiency = _efficiency(flops_efficiency, "flops_efficiency")
        self._reset()

    def update_hbm_memory_efficiency(self, hbm_memory_efficiency: float) -> None:
        self.hbm_memory_efficiency = _efficiency(hbm_memory_efficiency, "hbm_memory_efficiency")
        self._reset()

    def update_intra_node_memory_efficiency(self, intra_node_memory_efficiency: float) -> None:
        self.intra_node_memory_efficiency = _efficiency(intra_node_memory_efficiency, "intra_node_memory_efficiency")
        self._reset()

    def update_inter_node_memory_efficiency(self, inter_node_memory_efficiency: float) -> None:
        self.inter_node_memory_efficiency = _efficiency(inter_node_memory_efficiency, "inter_node_memory_efficiency")
        self._reset()
