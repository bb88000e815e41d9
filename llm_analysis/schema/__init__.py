"""Configuration schema: pydantic models of a model, a GPU, data types and a parallelism layout;
the options users choose and their limits."""
