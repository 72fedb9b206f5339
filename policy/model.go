package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/internal/generate"
)

// ErrInput marks token ids, gradients or options a Model cannot use; the
// message names the sequence and position.
var ErrInput = errors.New("policy: invalid input")

// Model is a decoder-only transformer (Qwen3, Qwen2 or Llama, as Config
// describes it) built from modules — embedding, decoder layers of
// attention and SwiGLU MLP with their norms, final norm, LM head — each a
// forward and backward over the paired kernels of a backend.Backend, so
// that one definition runs on every backend, the CPU's and the GPU's. It
// implements lm.Trainable (per-token log-probs and entropies with a
// paired backward) and lm.Sampler (batched generation with a KV cache and
// sessions).
//
// The parameters live on the host (Params, which the optimizer updates in
// place) and are copied to the backend at the start of each computation,
// so a GPU backend sees the optimizer's updates — unless NewDeviceAdamW
// moved the training state to the backend, where it then stays. Calls
// are serialised: a Model is safe for concurrent use, and runs one
// computation at a time.
type Model struct {
	cfg Config
	be  backend.Backend
	net *transformer
	w   *weights // the tensors, and where their newest values are
	eos []int

	mu   sync.Mutex // serialises computations on the device buffers
	lora *loraState // the adapter, nil without one
	// loraEpoch counts the changes of the function computed (adapters
	// attached, merged, unmerged); a backward checks it against its
	// forward's.
	loraEpoch uint64
	devOpt    *DeviceAdamW // the optimizer of a training state on the backend, freed by Close
	// gen is the generation engine: scheduler, paged KV cache and
	// sessions. It holds mu for a burst of generation (genModel.Lock).
	gen *generate.Engine
	// checkpoint: a forward with gradients keeps each layer's input only,
	// and the backward recomputes the layer from it (activation
	// checkpointing). Under mu.
	checkpoint bool
}

// ModelOption configures New and Load.
type ModelOption func(*modelOptions)

type modelOptions struct {
	be          backend.Backend
	backendInit bool
	checkpoint  bool
	gen         generate.Config // sessions, sampler seed, decoder, GenerateOptions
}

// WithBackend runs the model on be instead of the default CPU backend:
// package device opens the one a program's -device flag chooses (the
// CPU, or a CUDA GPU through package gpu).
func WithBackend(be backend.Backend) ModelOption { return func(o *modelOptions) { o.be = be } }

// WithMaxSessions bounds how many sessions' KV caches the sampler keeps
// (least recently used dropped first); default 64, values below 1 mean 1.
func WithMaxSessions(n int) ModelOption {
	return func(o *modelOptions) { o.gen.MaxSessions = max(n, 1) }
}

// WithDecoder gives the sampler a detokeniser (for example a tokenizer's
// Decode), which Stop strings need; without one, a request with Stop
// strings is an error.
func WithDecoder(decode func(ids []int) string) ModelOption {
	return func(o *modelOptions) { o.gen.Decode = decode }
}

// WithSamplerSeed seeds the sampler's own random source, from which
// requests without SampleParams.Seed draw (default 0).
func WithSamplerSeed(seed uint64) ModelOption { return func(o *modelOptions) { o.gen.Seed = seed } }

// WithBackendInit makes New draw the random weights on the model's
// backend (backend.Initializer: a GPU makes them in device memory)
// instead of on the host and uploading them: for large models, whose
// weights would otherwise be generated one by one on the host and copied
// across. The distribution is New's; the values differ from the host
// generator's (tensor k of the model draws backend.NormalAt from stream
// backend.StreamSeed(seed, k)), and are the same on every backend that
// implements the interface. The host copies are filled only when asked
// for (Params, Save, Clone). A backend without an Initializer makes New
// fail with an error wrapping errors.ErrUnsupported. Load ignores it.
func WithBackendInit() ModelOption { return func(o *modelOptions) { o.backendInit = true } }

// WithActivationCheckpointing makes a forward with gradients keep only
// each decoder layer's input, and the backward recompute the layer's
// forward from it before going back through it (activation
// checkpointing, torch.utils.checkpoint per layer as transformers'
// gradient_checkpointing_enable does). The activations held between a
// forward and its backward shrink from every layer's (≈ 14 values per
// hidden unit and token in a Qwen3 layer, more with a wide MLP) to one
// hidden vector per layer and token, plus one layer's at a time during
// the backward; the price is a second forward of the layers. Gradients
// are the same bit for bit as without it on a backend whose kernels are
// deterministic (the CPU's; the GPU's but the embedding's scatter-add).
// SetActivationCheckpointing changes it later.
func WithActivationCheckpointing() ModelOption { return func(o *modelOptions) { o.checkpoint = true } }

func buildOptions(opts []ModelOption) modelOptions {
	o := modelOptions{gen: generate.Config{MaxSessions: 64}}
	for _, f := range opts {
		f(&o)
	}
	if o.be == nil {
		o.be = cpu.New()
	}
	return o
}

// New returns a model with random weights initialised as transformers'
// _init_weights does: linear and embedding weights from
// normal(0, initializer_range) (config.json "initializer_range", default
// 0.02), biases 0, RMSNorm weights 1. The same seed gives the same weights.
func New(cfg Config, seed uint64, opts ...ModelOption) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	std := 0.02
	if raw, ok := cfg.Extra["initializer_range"]; ok {
		if err := json.Unmarshal(raw, &std); err != nil || !(std >= 0) || math.IsInf(std, 0) {
			return nil, fmt.Errorf("%w: initializer_range = %s is not a finite number ≥ 0", ErrConfig, raw)
		}
	}
	o := buildOptions(opts)
	var ini backend.Initializer
	if o.backendInit {
		var ok bool
		if ini, ok = o.be.(backend.Initializer); !ok {
			return nil, fmt.Errorf("%w: backend %s cannot draw random weights (backend.Initializer)", errors.ErrUnsupported, o.be.Name())
		}
	}
	m, err := newModel(cfg, o)
	if err != nil {
		return nil, err
	}
	if ini != nil {
		if err := m.w.initOnBackend(ini, seed, float32(std), isNorm, isBias); err != nil {
			m.w.free()
			return nil, err
		}
		return m, nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for _, p := range m.w.base {
		switch {
		case isNorm(p.spec.Name):
			for i := range p.data {
				p.data[i] = 1
			}
		case isBias(p.spec.Name):
		default:
			for i := range p.data {
				p.data[i] = float32(rng.NormFloat64() * std)
			}
		}
	}
	return m, nil
}

func isNorm(name string) bool {
	return hasSuffix(name, "norm.weight") || hasSuffix(name, "layernorm.weight")
}

func isBias(name string) bool { return hasSuffix(name, ".bias") }

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// newModel lays out cfg's modules and allocates their tensors (zero) on
// the host and the backend.
func newModel(cfg Config, o modelOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	net, params := layout(cfg)
	w, err := newWeights(o.be, params)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, be: o.be, net: net, w: w, eos: slices.Clone(cfg.EOSTokenIDs), checkpoint: o.checkpoint}
	gc := o.gen
	gc.ErrInput = ErrInput
	m.gen = generate.New(newGenModel(m), decoderOf(o.be), gc)
	return m, nil
}

// SetActivationCheckpointing turns activation checkpointing on or off for
// the forward passes that follow (see WithActivationCheckpointing); a
// backward follows its own forward's choice.
func (m *Model) SetActivationCheckpointing(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkpoint = on
}

// Close releases the model's device memory: its weights, gradients and
// the sampler's session caches. The model is unusable afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen.Reset()
	// The weights first: an optimizer ending with a model that has
	// weights (ShardOptions.BF16Weights) would widen them back.
	m.w.free()
	if m.devOpt != nil {
		m.devOpt.free()
	}
	return nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// Backend returns the backend the model runs on.
func (m *Model) Backend() backend.Backend { return m.be }

// EOSTokenIDs are the end-of-sequence tokens that end a generation: the
// config's eos_token_id and, for a loaded checkpoint, generation_config.json's.
func (m *Model) EOSTokenIDs() []int { return append([]int(nil), m.eos...) }

// Params lists the trainable parameters: without an adapter, every
// weight in the checkpoint's order with Hugging Face names (tied
// embeddings once, under model.embed_tokens.weight); with a LoRA adapter
// (AddLoRA, LoadAdapter), only the adapter's A and B under PEFT's names,
// the base weights being frozen. Data and Grad are host slices the
// optimizer updates in place; the model copies Data to the backend at the
// start of every computation.
//
// A model whose training state is on its backend (NewDeviceAdamW) gets it
// back: Params copies the current weights and gradients into the host
// slices and ends the DeviceAdamW (its methods then fail), because
// whoever takes the host slices trains through them from then on. A
// DeviceAdamW's own Params gives a view without ending it.
func (m *Model) Params() []lm.Param {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endDeviceOptimizer()
	return m.w.handOut()
}

// endDeviceOptimizer frees the device optimizer, if any; the caller
// holds m.mu and moves the training state's home as it needs.
func (m *Model) endDeviceOptimizer() {
	if m.devOpt != nil {
		m.devOpt.free()
		m.devOpt = nil
	}
}

// checkIDs validates token ids against the vocabulary.
func (m *Model) checkIDs(seq int, ids []int) error {
	for t, id := range ids {
		if id < 0 || id >= m.cfg.VocabSize {
			return fmt.Errorf("%w: sequence %d, position %d: token id %d outside [0, %d)", ErrInput, seq, t, id, m.cfg.VocabSize)
		}
	}
	return nil
}

// Clone returns a new model with m's configuration, end-of-sequence
// tokens and current weights, built with opts as New's (WithBackend to
// place it; the CPU backend by default). A model with an adapter cannot
// be cloned (ErrLoRA): clone the base, then attach. Clone waits for m to
// be idle, and does not hand m's weights out (see Params).
func (m *Model) Clone(opts ...ModelOption) (*Model, error) {
	c, err := newModel(m.cfg, buildOptions(opts))
	if err != nil {
		return nil, err
	}
	c.eos = slices.Clone(m.eos)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lora != nil {
		c.w.free()
		return nil, fmt.Errorf("%w: the model carries an adapter; clone its base and attach one to the clone", ErrLoRA)
	}
	if err := m.w.pull(false); err != nil {
		c.w.free()
		return nil, err
	}
	for i, p := range m.w.base {
		copy(c.w.base[i].data, p.data)
	}
	return c, nil
}
