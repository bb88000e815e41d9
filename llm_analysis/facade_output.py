"""The facade's presentation methods (names of the mirrored API); the drawing
itself lives in `report`."""

from __future__ import annotations

import logging

logger = logging.getLogger("llm_analysis.facade")


class SummaryOutput:
    """Mixin of `LLMAnalysis`: describe the setup, print and write summaries."""

    def get_configs_desc(self) -> str:
        p = self.parallelism_config
        return (f"{self.model_config.name}-{self.gpu_config.name}-{self.dtype_config.name}-tp{p.tp_size}-pp{p.pp_size}"
                f"-dp{p.dp_size}-sp{p.sp_size}-fe{round(self.flops_efficiency, 2)}"
                f"-ep{p.ep_size}-hbme{round(self.hbm_memory_efficiency, 2)}")

    def print_config(self, name: str = "Training Configs") -> None:
        from llm_analysis.report.render import format_configs
        logger.info(format_configs(self, name))

    def get_readable_summary_dict(self, summary_dict: dict, title: str = "Summary") -> str:
        from llm_analysis.report.render import readable_summary
        return readable_summary(summary_dict, title)

    def output_summary_dict(self, summary_dict: dict, output_dir: str, print_human_readable: bool = True,
                            output_file_suffix: str = "") -> str:
        from llm_analysis.report.render import write_summary_files
        return write_summary_files(self, summary_dict, output_dir, print_human_readable, output_file_suffix)
