"""The fire commands: infer, train, plan (and config in `llm_analysis.config`)."""
