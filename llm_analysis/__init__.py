"""llm-analysis: parameters, FLOPs, memory and time of transformer LLMs for
training and inference, from their shapes alone."""

__version__ = "0.1.0"
