package lm

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// SampleParams controls generation, with vLLM's names and semantics
// (vllm.SamplingParams). The zero value asks for greedy decoding until an
// end-of-sequence token or the model's context limit: each field's zero
// is meaningful (greedy, no truncation, no token bound, no stop strings,
// no seed, no log-probabilities). Two of them differ from vLLM's
// defaults: Temperature 0 is greedy where vLLM samples at 1, and
// MaxNewTokens 0 is unbounded where vLLM stops at 16.
type SampleParams struct {
	// Temperature divides the logits; below GreedyTemperature (1e-5,
	// including 0) decoding is greedy (argmax). Set it (vLLM's default
	// is 1) to sample.
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (nucleus sampling); 0 or 1 disables it.
	TopP float64
	// TopK keeps the TopK most likely tokens (and any tied with the last);
	// 0 or -1 disables it.
	TopK int
	// MinP drops tokens less likely than MinP times the most likely one;
	// 0 disables it.
	MinP float64
	// MaxNewTokens bounds the number of generated tokens; 0 means no bound
	// but the model's context (policy/openai sends a server the room its
	// context leaves after the prompt, as no engine takes "unbounded").
	MaxNewTokens int
	// StopTokenIDs end generation when sampled, in addition to the model's
	// end-of-sequence tokens; the stop token is kept as the last token.
	StopTokenIDs []int
	// Stop ends generation when the decoded output contains one of these
	// strings (the tokens up to the one completing it are kept).
	Stop []string
	// Seed, when set, makes the request's sampling reproducible on the
	// local sampler. Requests without a seed draw from the sampler's own
	// source, so a group of identical prompts gets different samples.
	Seed *uint64
	// Logprobs asks for the log-probability of each generated token.
	Logprobs bool
	// TopLogprobs, with Logprobs, also asks for the TopLogprobs most
	// likely tokens at each step (Generation.TopLogProbs), as vLLM's
	// logprobs: N does; 0 asks for none.
	TopLogprobs int
}

// GenerateRequest is one sequence to continue.
type GenerateRequest struct {
	// Prompt is the full token prefix to continue: for a later turn of a
	// multi-turn rollout, every token so far — the original prompt, the
	// tokens generated earlier, exactly as returned, and the appended tool
	// result tokens.
	Prompt []int
	Params SampleParams
	// Session, when not empty, names a conversation whose computed state a
	// sampler may reuse: a local sampler keeps the KV cache of a session's
	// last sequence and, when that sequence is a prefix of Prompt,
	// prefills only the new tokens. The result never depends on Session;
	// only the cost does. Release the state with SessionCloser.
	Session string
}

// FinishReason says why a generation ended.
type FinishReason string

const (
	// FinishStopToken: an end-of-sequence or StopTokenIDs token was
	// sampled; it is the last token of the generation.
	FinishStopToken FinishReason = "stop_token"
	// FinishStop: the decoded output contains a Stop string.
	FinishStop FinishReason = "stop"
	// FinishLength: MaxNewTokens were generated, or the model's context
	// is full.
	FinishLength FinishReason = "length"
	// FinishAbort: the generation was interrupted before it ended — a
	// weight update or a pause in abort mode (vLLM's and SGLang's
	// finish_reason "abort") — and the Generation holds what was sampled
	// until then: its Tokens, their log-probabilities, and the
	// WeightVersion that sampled them. Sending the request again with
	// those tokens appended to its Prompt (and MaxNewTokens reduced by
	// their number) continues it: a partial rollout, as package rollout
	// does. A sampler returns it only when asked to interrupt
	// (ErrInterrupted); otherwise an interruption is an error.
	FinishAbort FinishReason = "abort"
)

// ErrInterrupted is the cause (context.Cause) with which a caller
// cancels a Generate call to interrupt it rather than give it up: a
// sampler that supports partial rollouts (package policy's, package
// serve's) then returns the tokens sampled so far with FinishAbort and
// no error; one that does not returns the context's error as for any
// other cancellation. Wrap it to say why (a weight update).
var ErrInterrupted = errors.New("lm: generation interrupted")

// Generation is the continuation of one GenerateRequest.
type Generation struct {
	// Tokens are the generated token ids, exactly as sampled.
	Tokens []int
	// LogProbs, when SampleParams.Logprobs was set, holds for each token its
	// log-probability under the distribution it was sampled from, after
	// temperature, min-p, top-k and top-p (0 for greedy decoding). This is
	// the behaviour policy's probability that importance-sampling
	// corrections need; vLLM by default returns raw log-probabilities
	// instead (see RawLogProbs).
	LogProbs []float32
	// RawLogProbs, when Logprobs was set and the sampler can give them,
	// holds log-softmax of the unprocessed logits (temperature 1, no
	// truncation): vLLM's default "raw_logprobs". Nil otherwise.
	RawLogProbs []float32
	// TopLogProbs, when SampleParams.TopLogprobs is positive, holds for
	// each token the TopLogprobs most likely tokens of the distribution it
	// was drawn from (fewer when the vocabulary is smaller), most likely
	// first: by decreasing logit, ties by increasing id, which is the
	// order of both their LogProb and RawLogProb. Nil otherwise.
	TopLogProbs  [][]TokenLogProb
	FinishReason FinishReason
	// StopToken is the stop token for FinishStopToken.
	StopToken int
	// StopString is the matched Stop string for FinishStop.
	StopString string
	// CachedTokens is how many leading Prompt tokens were not recomputed
	// because the sampler reused their state (a session's KV cache or a
	// server's prefix cache); 0 when unknown.
	CachedTokens int
	// WeightVersion names the weights that generated every token (of a
	// FinishAbort generation too), when the sampler knows it: the "metadata.weight_version" that SGLang and
	// package serve report, or the trainer's policy version that a
	// versioned sampler (package fleet) stamps. Empty when unknown.
	WeightVersion string
}

// TokenLogProb is one of the most likely tokens at a step of a
// generation, with its log-probabilities in the senses of
// Generation.LogProbs and Generation.RawLogProbs.
type TokenLogProb struct {
	Token int
	// LogProb is the token's log-probability under the distribution the
	// step was drawn from (after temperature, min-p, top-k and top-p):
	// −Inf for a token that truncation removed; for greedy decoding 0
	// for the chosen token and −Inf for the others.
	LogProb float32
	// RawLogProb is log-softmax of the unprocessed logits at the token.
	RawLogProb float32
}

// Sampler generates continuations of token sequences: the local
// transformer, a remote OpenAI-compatible server, or a scripted test
// double. Implementations must be safe for concurrent use.
//
// Multi-turn continuation: after a tool call, the rollout engine sends a
// new request whose Prompt is the previous Prompt, then the previous
// Generation's Tokens, then the tool-result tokens, with the same Session.
// The local sampler then prefills only the tokens after the prefix its
// session cache holds (Generation.CachedTokens says how many it reused);
// a remote sampler sends the whole prefix and relies on the server's
// prefix cache. Either way the sampler works on token ids only and never
// re-tokenises text, so what the trainer scores is exactly what was
// sampled.
type Sampler interface {
	// Generate continues every request, returning one Generation per
	// request in order. It stops early with ctx's error when ctx ends.
	Generate(ctx context.Context, reqs []GenerateRequest) ([]Generation, error)
}

// SessionCloser is implemented by samplers that keep state per
// GenerateRequest.Session; CloseSession releases it. Closing an unknown
// session is not an error.
type SessionCloser interface {
	CloseSession(session string)
}

// ErrSampling marks invalid sampling parameters or logits.
var ErrSampling = errors.New("lm: sampling")

// GreedyTemperature is the temperature below which sampling is greedy, as
// vLLM's _SAMPLING_EPS: dividing by a smaller one would overflow.
const GreedyTemperature = 1e-5

// CheckSampleParams validates the sampling fields of p.
func CheckSampleParams(p SampleParams) error {
	switch {
	case math.IsNaN(p.Temperature) || math.IsInf(p.Temperature, 0) || p.Temperature < 0:
		return fmt.Errorf("%w: temperature %g, want a finite value ≥ 0", ErrSampling, p.Temperature)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return fmt.Errorf("%w: top_p %g, want 0 < top_p ≤ 1 (0 disables)", ErrSampling, p.TopP)
	case p.TopK < -1:
		return fmt.Errorf("%w: top_k %d, want ≥ 1 (0 or -1 disables)", ErrSampling, p.TopK)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return fmt.Errorf("%w: min_p %g, want 0 ≤ min_p ≤ 1", ErrSampling, p.MinP)
	case p.MaxNewTokens < 0:
		return fmt.Errorf("%w: max_new_tokens %d is negative", ErrSampling, p.MaxNewTokens)
	case p.TopLogprobs < 0:
		return fmt.Errorf("%w: top_logprobs %d is negative", ErrSampling, p.TopLogprobs)
	case p.TopLogprobs > 0 && !p.Logprobs:
		return fmt.Errorf("%w: top_logprobs %d without logprobs", ErrSampling, p.TopLogprobs)
	}
	return nil
}
