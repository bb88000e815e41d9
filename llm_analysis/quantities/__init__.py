"""Named views over the operator description and the cost model: parameters,
FLOPs, weights and KV cache, activations, optimizer state and latency. Each
function takes the analysis (`LLMAnalysis`) and reads only its public
collaborators: `describer`, `cost_model`, `describer_for(...)` and the configs."""
