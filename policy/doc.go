// Package policy holds the model that agentrl trains: the Sampler and
// Trainable interfaces, the transformer (Qwen3, Qwen2 and Llama from an
// HF config.json and safetensors), sampling with a KV cache, the AdamW
// optimizer and checkpoints.
//
// The transformer is written once over a small backend interface of paired
// forward/backward kernels; the CPU backend lives here and the CUDA backend
// in package gpu, and both pass the same conformance suite.
//
// policy must not import rollout, reward, advantage, loss, dataset or the
// root package: those depend on it, not the other way round.
package policy
