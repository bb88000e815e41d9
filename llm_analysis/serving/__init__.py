"""Serving under load (continuous batching, request rates, tails): see DESIGN.md section 5."""
