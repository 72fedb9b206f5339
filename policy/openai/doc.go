// Package openai provides a policy Sampler over OpenAI-compatible
// /v1/completions servers such as vLLM and SGLang: token ids in, token ids
// and per-token log-probabilities out, with load balancing, failover and
// retries across several servers.
//
// Requests send the prompt as a list of token ids with vLLM's sampling
// parameters (temperature, top_p, top_k, min_p, seed, stop,
// stop_token_ids, max_tokens) and ask for logprobs with
// return_tokens_as_token_ids, so that generated tokens come back as ids
// ("token_id:123") and are never re-tokenised; vLLM's finish_reason and
// stop_reason map onto policy.FinishReason, StopToken and StopString.
// Each request goes to the least busy server; connection errors,
// timeouts and 5xx answers are retried on another server with
// exponential backoff and jitter, 4xx answers are not.
//
// openai may import policy and policy/tokenizer only.
package openai
