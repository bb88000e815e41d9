"""Cache sizes of shipped models counted by hand from their config.json, for tests in several folders.

Qwen3.5-27B (config.json of Qwen/Qwen3.5-27B): of its 64 layers every 4th is full attention (16 layers: 4 KV
heads x head dim 256, K and V, a 16-bit cache) and 48 are gated-delta-net layers. Each of those keeps per
request, whatever its length, a conv state of (2 x 16 key heads x 128 + 48 value heads x 128) channels x
kernel 4 at the cache's 2 bytes and a recurrent state of 48 value heads x 128 x 128 in float32
(ssm_state_dtype_bytes 4). One GPU (tp 1)."""

QWEN35_27B = "Qwen/Qwen3.5-27B"
QWEN35_27B_KV_BYTES_PER_TOKEN = 16 * 4 * (256 + 256) * 2
QWEN35_27B_STATE_BYTES_PER_REQUEST = 48 * ((2 * 16 * 128 + 48 * 128) * 4 * 2 + 48 * 128 * 128 * 4)
