"""The Hub family table: one row per Hugging Face `model_type` we map exactly, by kind."""
