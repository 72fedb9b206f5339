// Package fleet trains against an inference fleet: rollouts are sampled
// by vLLM or SGLang servers (or by package serve, which speaks both
// APIs), and the trainer publishes its weights to them every few steps.
//
// A Fleet is a policy.Sampler over its servers (through policy/openai,
// with failover and retries) that knows which weights the servers hold.
// Publish writes the policy as a Hugging Face checkpoint into a folder
// the servers can read, atomically (a server never sees a partial
// checkpoint), and has every server load it through its own API:
//
//   - SGLang: POST /pause_generation {"mode": "in_place"}, then
//     POST /update_weights_from_disk {"model_path", "weight_version",
//     "flush_cache": true}, then POST /continue_generation
//     (python/sglang/srt/entrypoints/http_server.py).
//   - vLLM, with VLLM_SERVER_DEV_MODE=1: POST /pause?mode=wait, then
//     POST /collective_rpc {"method": "reload_weights", "kwargs":
//     {"weights_path"}}, then POST /resume (vllm/entrypoints/serve/dev);
//     releases whose reload_weights takes no arguments get
//     {"method": "update_config", "args": [{"model_config": {"model"}}]}
//     first (Kind VLLMModelConfig).
//
// No turn ever mixes two weight versions: Publish waits for the turns in
// flight through the Fleet to end and holds new ones until every server
// has answered, and the servers' pause makes the same promise for
// requests from elsewhere. Every generation carries the version that
// produced it (policy.Generation.WeightVersion); a server that reports
// another version than the one published (SGLang and package serve
// report theirs) is passed over, and when none is current the call fails
// naming the server (openai.ErrWeightVersion). A server that fails to
// take an update makes Publish fail with an error that names it.
//
// LoRA adapters are not published yet: full weights only.
package fleet
