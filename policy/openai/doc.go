// Package openai provides a policy Sampler over OpenAI-compatible
// /v1/completions servers such as vLLM and SGLang: token ids in, token ids
// and per-token log-probabilities out, with load balancing, failover and
// retries across several servers.
//
// openai may import policy and policy/tokenizer only.
package openai
