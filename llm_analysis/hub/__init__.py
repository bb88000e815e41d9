"""Hugging Face Hub import: download a config.json, map it to a ModelConfig (family table, generic
mapping, refusals of features we do not model)."""
