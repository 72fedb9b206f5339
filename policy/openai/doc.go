// Package openai provides a policy Sampler over inference servers: vLLM
// (and other servers of its OpenAI-compatible /v1/completions) and
// SGLang (its native /generate), as Config.API says. Token ids go in,
// token ids and per-token log-probabilities come out, with load
// balancing, failover and retries across several servers.
//
// With APICompletions, requests send the prompt as a list of token ids
// with vLLM's sampling parameters (temperature, top_p, top_k, min_p,
// seed, stop, stop_token_ids, max_tokens) and ask for logprobs with
// return_tokens_as_token_ids, so that generated tokens come back as ids
// ("token_id:123") and are never re-tokenised; vLLM's finish_reason and
// stop_reason map onto lm.FinishReason, StopToken and StopString.
//
// With APISGLangGenerate, requests send input_ids and SGLang's
// sampling_params (temperature, top_p, top_k, min_p, sampling_seed,
// stop, stop_token_ids, max_new_tokens) with return_logprob; the tokens
// are output_ids, checked against the ids of
// meta_info.output_token_logprobs, and meta_info.finish_reason maps onto
// the same fields. SGLang's log-probabilities are by default scaled by
// the temperature but not truncated (ScaledLogprobs), which this package
// files as LogProbs or RawLogProbs only where they are those values.
//
// Every request carries a concrete bound on its new tokens (max_tokens,
// max_new_tokens), never null or absent: vLLM reads a missing or null
// max_tokens as 16 tokens and answers after 16 with finish_reason
// "length" and no error (vllm/entrypoints/openai/completion/protocol.py,
// CompletionRequest.normalize_null_max_tokens), and SGLang's default is
// 128. A request with MaxNewTokens 0 ("up to the context") gets the room
// the server's context leaves after the prompt, from Config.MaxModelLen
// or the max_model_len of the server's GET /v1/models; a server that
// reports no length cannot take it (ErrUnbounded).
//
// Config.Adapter names a LoRA adapter to sample from, read once per
// request so that it can change at run time (package fleet switches it
// when it publishes a new adapter): it goes out as "model" to
// /v1/completions, as vLLM addresses a loaded adapter, and as
// "lora_path" to SGLang's /generate. A server that does not hold the
// adapter, or a completion that names another model, is passed over as
// a server with stale weights is (ErrWeightVersion).
//
// Each request goes to the least busy server; connection errors,
// timeouts, 429 and 5xx answers and generations the server aborted are
// retried on another server with exponential backoff and jitter, other
// 4xx answers are not.
//
// Of agentrl, openai imports only lm (the interfaces).
package openai
