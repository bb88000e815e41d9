"""Cost model layer: operator -> seconds and bound (roofline kernels, ring
collectives over the links a group uses). The only place a time is computed."""

from llm_analysis.cost.affine import sum_affine, sum_max_affine
from llm_analysis.cost.links import Link, collective_time_s, link_for_group
from llm_analysis.cost.model import CostModel, RooflineCostModel
from llm_analysis.cost.roofline import Roofline, peak_tflops_for_dtype

__all__ = ["CostModel", "RooflineCostModel", "Roofline", "peak_tflops_for_dtype", "Link", "link_for_group",
           "collective_time_s", "sum_affine", "sum_max_affine"]
