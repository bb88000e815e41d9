"""The README commands whose printed output tests/test_cli_golden.py pins."""

COMMANDS = {
    "infer_llama31_8b": ["infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name", "h100-sxm-80gb",
                         "--batch_size_per_gpu", "8", "--seq_len", "2048", "--num_tokens_to_generate", "256"],
    "infer_llama2_70b": ["infer", "--model_name", "upstage_Llama-2-70b-instruct-v2", "--gpu_name", "a100-sxm-40gb",
                         "--tp_size", "8", "--batch_size_per_gpu", "20", "--seq_len", "1024",
                         "--num_tokens_to_generate", "1024"],
    "train_gpt3_175b": ["train", "--model_name", "megatron-lm-175b", "--gpu_name", "a100-sxm-80gb", "--tp_size", "8",
                        "--pp_size", "16", "--total_num_gpus", "1024", "--global_batch_size", "1536", "--seq_len",
                        "2048", "--total_num_tokens", "300e9", "--activation_recomputation", "4",
                        "--achieved_tflops", "140"],
    "infer_json": ["infer", "--model_name", "meta-llama/Llama-3.1-8B", "--gpu_name", "h100-sxm-80gb",
                   "--output_format", "json"],
    "train_json": ["train", "--model_name", "megatron-lm-175b", "--gpu_name", "a100-sxm-80gb", "--tp_size", "8",
                   "--pp_size", "16", "--total_num_gpus", "1024", "--global_batch_size", "1536", "--seq_len", "2048",
                   "--total_num_tokens", "300e9", "--activation_recomputation", "4", "--output_format", "json"],
    # aggregated serving (the README's serve command): the report's sections as they were before the disaggregated
    # pools got theirs (the pools' lines print only for a disaggregated answer)
    "serve_llama31_70b": ["serve", "--model_name", "meta-llama/Llama-3.1-70B", "--gpu_name", "h100-sxm-80gb",
                          "--dtype_name", "fp8", "--tp_size", "4", "--concurrency", "64", "--input_len", "1024",
                          "--output_len", "1024", "--framework", "vllm"],
}
