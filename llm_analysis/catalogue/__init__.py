"""The shipped JSON catalogues (model_configs/, gpu_configs/, dtype_configs/) and name lookup over them."""
