package lm

import (
	"context"

	"github.com/agentrl/agentrl/policy/safetensors"
)

// TokenBatch is a batch of token sequences to score. Sequences may have
// different lengths; per-token results are aligned with Tokens.
type TokenBatch struct {
	Tokens [][]int
	// Temperature divides the logits before the log-softmax, as verl does
	// when it recomputes log-probabilities of sampled responses; 0 means 1.
	Temperature float64
	// Mask, when not nil, marks with nonzero values the positions whose
	// results are needed (response tokens); others may be skipped and are
	// returned as 0. Same shape as Tokens.
	Mask [][]float32
}

// TokenStats holds per-token results, aligned with TokenBatch.Tokens:
// LogProbs[b][t] = log p(Tokens[b][t] | Tokens[b][:t]) and Entropy[b][t] is
// the entropy of that predictive distribution. Position 0 has no
// prediction and holds 0.
type TokenStats struct {
	LogProbs [][]float32
	Entropy  [][]float32
}

// BackwardFunc propagates gradients of a loss with respect to the
// per-token log-probabilities and entropies of a forward pass into the
// parameters' gradients, adding to what is there. gradEntropy may be nil
// when the loss has no entropy term. It may be called once.
type BackwardFunc func(ctx context.Context, gradLogProbs, gradEntropy [][]float32) error

// Trainable is a model the trainer can optimise: it scores sequences and
// backpropagates a loss given as gradients with respect to those scores,
// which is all that policy-gradient losses need.
type Trainable interface {
	// Forward computes per-token log-probabilities and entropies. When
	// withGrad is true it keeps what Backward needs and returns a non-nil
	// BackwardFunc; otherwise (reference or old-policy log-probabilities)
	// it keeps nothing and returns nil.
	Forward(ctx context.Context, batch TokenBatch, withGrad bool) (TokenStats, BackwardFunc, error)
	// Params lists the trainable parameters and their gradient buffers,
	// the same slices on every call, in a stable order.
	Params() []Param
}

// Saver writes a model as a Hugging Face checkpoint folder that vLLM,
// SGLang and transformers load: *policy.Model implements it. Publishing weights
// to an inference fleet (package fleet) needs it.
type Saver interface {
	Save(dir string, opts SaveOptions) error
}

// Param is a named float32 parameter and its gradient, of equal length. The
// optimizer updates Data in place from Grad.
type Param struct {
	Name string
	Data []float32
	Grad []float32
}

// SaveOptions controls Save. The zero value writes float32 in one file
// (transformers' save_pretrained would shard above its max_shard_size).
type SaveOptions struct {
	// DType is safetensors.F32 (default) or safetensors.BF16 (rounded to
	// nearest even, as torch's .to(torch.bfloat16)).
	DType safetensors.DType
	// MaxShardBytes splits the weights into
	// model-0000i-of-0000N.safetensors shards with an index above this
	// size, as save_pretrained's max_shard_size; 0 means one file.
	MaxShardBytes int64
}

// AdapterSaver writes a policy's LoRA adapter as a PEFT adapter folder
// that vLLM's /v1/load_lora_adapter and SGLang's /load_lora_adapter load;
// *policy.Model implements it. Package fleet publishes adapters through it.
type AdapterSaver interface {
	SaveAdapter(dir string, opts AdapterSaveOptions) error
}

// AdapterSaveOptions controls SaveAdapter. The zero value writes float32
// with the configuration as trained.
type AdapterSaveOptions struct {
	// DType is safetensors.F32 (default) or safetensors.BF16.
	DType safetensors.DType
	// FoldScale writes use_rslora false and lora_alpha = scale·r, which
	// every reader turns back into the same scale. SGLang computes
	// lora_alpha/r whatever use_rslora says (python/sglang/srt/lora/lora.py),
	// so an rsLoRA adapter meant for SGLang must be saved this way.
	FoldScale bool
}
