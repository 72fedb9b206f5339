// Package lm says what the rest of agentrl asks of a language model, and
// nothing else: sampling (Sampler, with GenerateRequest, SampleParams and
// Generation), training (Trainable, with TokenBatch, TokenStats,
// BackwardFunc and Param), writing checkpoints and adapters for an
// inference fleet (Saver, AdapterSaver), and the stop conditions and
// incremental detokenisation that every sampler applies the same way
// (StopChecker, TextStream).
//
// It imports no model, no kernels and no tensor library, so the packages
// that only talk to a model — rollout, fleet, policy/openai (a remote
// vLLM or SGLang server) and policy/policytest (a scripted one) — build
// without them. Package policy's transformer implements Sampler,
// Trainable, Saver and AdapterSaver.
//
// The field names and defaults follow vLLM's SamplingParams and
// completions API, so that a request means the same thing to the local
// model and to a server.
package lm
