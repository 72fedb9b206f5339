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
)

// ErrInput marks token ids, gradients or options a Model cannot use; the
// message names the sequence and position.
var ErrInput = errors.New("policy: invalid input")

// Model is a decoder-only transformer (Qwen3, Qwen2 or Llama, as Config
// describes it) written once over the paired forward/backward kernels of a
// backend.Backend, so that one definition runs on every backend, the CPU's
// and the GPU's. It implements Trainable (per-token log-probs and
// entropies with a paired backward) and Sampler (batched generation with a
// KV cache and sessions).
//
// The parameters live on the host (Params, which the optimizer updates in
// place) and are copied to the backend at the start of each computation,
// so a GPU backend sees the optimizer's updates — unless NewDeviceAdamW
// moved the training state to the backend, where it then stays. Calls
// are serialised: a
// Model is safe for concurrent use, and runs one computation at a time.
type Model struct {
	cfg    Config
	be     backend.Backend
	params []*param
	byName map[string]*param
	layers []layerParams
	embed  *param
	norm   *param
	head   *param // embed when the embeddings are tied
	freqs  []float32
	eos    []int

	mu   sync.Mutex // serialises computations on the device buffers
	lora *loraState // the adapter, nil without one
	// loraEpoch counts the changes of the function computed (adapters
	// attached, merged, unmerged); a backward checks it against its
	// forward's.
	loraEpoch uint64
	// baseDirty: the model changed its own host weights (a load, an
	// adapter attached, merged or unmerged) since they were last
	// uploaded; see syncWeights for when each weight is uploaded.
	baseDirty bool
	// resident: the trainable weights, their gradients and the optimizer
	// state live in backend buffers (NewDeviceAdamW); the host copies are
	// refreshed only when asked for (Params, Save, SaveAdapter).
	resident bool
	// weightsStale, gradsStale (resident): the backend holds newer
	// trainable weights (after an optimizer step) or gradients (after a
	// backward, zeroing or clipping) than the host slices. hostDirty
	// (resident): the host slices hold the truth (the model just moved
	// to the backend), so they are uploaded before the next computation.
	weightsStale, gradsStale, hostDirty bool
	// handedOut: Params gave the host slices away, so a holder (an
	// optimizer) may write them at any time and every computation
	// uploads the trainable weights; until then they change only with the
	// model's own loads, which set baseDirty.
	handedOut bool
	devOpt    *DeviceAdamW // the resident model's optimizer, freed by Close
	gen       *generator
}

// param is one tensor: host values and gradient, and their device copies.
type param struct {
	spec TensorSpec
	data []float32
	grad []float32
	w    backend.Buffer // device weights
	dw   backend.Buffer // device gradient, allocated by the first backward
	// frozen: not trained (the base weights under a LoRA adapter); grad
	// and dw are nil.
	frozen bool
}

// layerParams are one decoder layer's parameters; biases and q/k norms are
// nil when the architecture has none.
type layerParams struct {
	q, k, v, o, qb, kb, vb, ob *param
	qNorm, kNorm               *param
	gate, up, down, gb, ub, db *param
	inputNorm, postNorm        *param
}

// ModelOption configures New and Load.
type ModelOption func(*modelOptions)

type modelOptions struct {
	be          backend.Backend
	maxSessions int
	decode      func([]int) string
	seed        uint64
}

// WithBackend runs the model on be instead of the default CPU backend:
// package device opens the one a program's -device flag chooses (the
// CPU, or a CUDA GPU through package gpu).
func WithBackend(be backend.Backend) ModelOption { return func(o *modelOptions) { o.be = be } }

// WithMaxSessions bounds how many sessions' KV caches the sampler keeps
// (least recently used dropped first); default 64, values below 1 mean 1.
func WithMaxSessions(n int) ModelOption {
	return func(o *modelOptions) { o.maxSessions = max(n, 1) }
}

// WithDecoder gives the sampler a detokeniser (for example a tokenizer's
// Decode), which Stop strings need; without one, a request with Stop
// strings is an error.
func WithDecoder(decode func(ids []int) string) ModelOption {
	return func(o *modelOptions) { o.decode = decode }
}

// WithSamplerSeed seeds the sampler's own random source, from which
// requests without SampleParams.Seed draw (default 0).
func WithSamplerSeed(seed uint64) ModelOption { return func(o *modelOptions) { o.seed = seed } }

func buildOptions(opts []ModelOption) modelOptions {
	o := modelOptions{maxSessions: 64}
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
	m, err := newModel(cfg, buildOptions(opts))
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for _, p := range m.params {
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

// newModel allocates the parameters of cfg (zero) on the host and device.
func newModel(cfg Config, o modelOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, be: o.be, byName: make(map[string]*param), eos: append([]int(nil), cfg.EOSTokenIDs...), baseDirty: true}
	for _, s := range cfg.TensorSpecs() {
		n := int(s.Size())
		w, err := m.be.Alloc(n)
		if err != nil {
			m.free()
			return nil, fmt.Errorf("policy: allocating %s: %w", s.Name, err)
		}
		p := &param{spec: s, data: make([]float32, n), grad: make([]float32, n), w: w}
		m.params = append(m.params, p)
		m.byName[s.Name] = p
	}
	get := func(name string) *param { return m.byName[name] } // nil when absent
	m.embed = get("model.embed_tokens.weight")
	m.norm = get("model.norm.weight")
	m.head = m.embed
	if !cfg.TieWordEmbeddings {
		m.head = get("lm_head.weight")
	}
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		pre := fmt.Sprintf("model.layers.%d.", i)
		m.layers = append(m.layers, layerParams{
			q: get(pre + "self_attn.q_proj.weight"), k: get(pre + "self_attn.k_proj.weight"),
			v: get(pre + "self_attn.v_proj.weight"), o: get(pre + "self_attn.o_proj.weight"),
			qb: get(pre + "self_attn.q_proj.bias"), kb: get(pre + "self_attn.k_proj.bias"),
			vb: get(pre + "self_attn.v_proj.bias"), ob: get(pre + "self_attn.o_proj.bias"),
			qNorm: get(pre + "self_attn.q_norm.weight"), kNorm: get(pre + "self_attn.k_norm.weight"),
			gate: get(pre + "mlp.gate_proj.weight"), up: get(pre + "mlp.up_proj.weight"),
			down: get(pre + "mlp.down_proj.weight"), gb: get(pre + "mlp.gate_proj.bias"),
			ub: get(pre + "mlp.up_proj.bias"), db: get(pre + "mlp.down_proj.bias"),
			inputNorm: get(pre + "input_layernorm.weight"), postNorm: get(pre + "post_attention_layernorm.weight"),
		})
	}
	if cfg.RopeScaling == nil || cfg.RopeScaling.Type == "default" {
		m.freqs = backend.RoPEFreqs(cfg.RopeTheta, cfg.HeadDim)
	} else {
		for _, f := range cfg.RopeInvFreq() {
			m.freqs = append(m.freqs, float32(f))
		}
	}
	m.gen = newGenerator(o)
	return m, nil
}

// free releases the device buffers of the parameters and adapters.
func (m *Model) free() {
	for _, p := range m.allParams() {
		if p.w != nil {
			_ = m.be.Free(p.w)
		}
		if p.dw != nil {
			_ = m.be.Free(p.dw)
		}
		p.w, p.dw = nil, nil
	}
}

// Close releases the model's device memory: its weights, gradients and
// the sampler's session caches. The model is unusable afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen.closeAll(m.be)
	if m.devOpt != nil {
		m.devOpt.free()
	}
	m.free()
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
	if m.resident {
		// An error here (a closed model) leaves the last host copy,
		// which is what there is.
		_ = m.pullHost(true)
		m.endResident()
	}
	m.handedOut = true
	return m.paramViews()
}

// endResident returns the training state to the host: the device
// optimizer ends; the host slices must already be current. The caller
// holds m.mu.
func (m *Model) endResident() {
	if m.devOpt != nil {
		m.devOpt.free()
		m.devOpt = nil
	}
	m.resident, m.hostDirty = false, false
}

// paramViews lists the trainable parameters' host slices.
func (m *Model) paramViews() []lm.Param {
	ps := m.trainable()
	out := make([]lm.Param, len(ps))
	for i, p := range ps {
		out[i] = lm.Param{Name: p.spec.Name, Data: p.data, Grad: p.grad}
	}
	return out
}

// trainable lists the parameters the optimizer updates: the adapter's
// when there is one, else every weight.
func (m *Model) trainable() []*param {
	if m.lora != nil {
		return m.lora.params
	}
	return m.params
}

// pullHost copies the backend's trainable weights into the host slices
// when they are newer (a resident model after a step), and with grads
// the gradients too; the caller holds m.mu.
func (m *Model) pullHost(grads bool) error {
	pullW, pullG := m.weightsStale, grads && m.gradsStale
	if !pullW && !pullG {
		return nil
	}
	for _, p := range m.trainable() {
		if p.w == nil {
			return fmt.Errorf("%w: the model is closed", ErrInput)
		}
		if pullW {
			if err := m.be.Download(p.data, p.w, 0); err != nil {
				return fmt.Errorf("policy: downloading %s: %w", p.spec.Name, err)
			}
		}
		if !pullG {
			continue
		}
		if p.dw == nil {
			clear(p.grad)
		} else if err := m.be.Download(p.grad, p.dw, 0); err != nil {
			return fmt.Errorf("policy: downloading the gradient of %s: %w", p.spec.Name, err)
		}
	}
	m.weightsStale = m.weightsStale && !pullW
	m.gradsStale = m.gradsStale && !pullG
	return nil
}

// pushHost uploads the trainable host weights and gradients (a resident
// model's restore); the caller holds m.mu.
func (m *Model) pushHost() error {
	for _, p := range m.trainable() {
		if err := m.be.Upload(p.w, 0, p.data); err != nil {
			return fmt.Errorf("policy: uploading %s: %w", p.spec.Name, err)
		}
		if err := m.uploadGrad(p); err != nil {
			return err
		}
	}
	m.weightsStale, m.gradsStale, m.hostDirty = false, false, false
	return nil
}

// allParams lists the base weights, then the adapter's.
func (m *Model) allParams() []*param {
	if m.lora == nil {
		return m.params
	}
	return append(slices.Clip(m.params), m.lora.params...)
}

// syncWeights uploads the host weights to the backend. An optimizer over
// Params updates the trainable host slices without telling the model, so
// once Params has handed them out every computation uploads them (a
// memcpy on the CPU backend); otherwise, and for frozen weights, only
// when the model changed them itself (a load, merge or unmerge); a
// resident model's trainable weights and gradients only when it moved to
// the backend.
func (m *Model) syncWeights() error {
	if m.params[0].w == nil {
		return fmt.Errorf("%w: the model is closed", ErrInput)
	}
	for _, p := range m.allParams() {
		switch {
		case p.frozen && !m.baseDirty:
			continue
		case !p.frozen && !m.resident && !m.handedOut && !m.baseDirty:
			// Nobody holds the host slices (a model that only samples,
			// such as a server's): they change only with a load.
			continue
		case !p.frozen && m.resident:
			if !m.hostDirty {
				continue
			}
			if err := m.uploadGrad(p); err != nil {
				return err
			}
		}
		if err := m.be.Upload(p.w, 0, p.data); err != nil {
			return fmt.Errorf("policy: uploading %s: %w", p.spec.Name, err)
		}
	}
	m.baseDirty, m.hostDirty = false, false
	return nil
}

// gradBuffer allocates p's backend gradient (zero) when it has none.
func (m *Model) gradBuffer(p *param) error {
	if p.dw != nil {
		return nil
	}
	var err error
	if p.dw, err = m.be.Alloc(len(p.data)); err != nil {
		return fmt.Errorf("policy: allocating the gradient of %s: %w", p.spec.Name, err)
	}
	return nil
}

// uploadGrad copies p's host gradient to its backend buffer, allocating
// it when needed (a resident model's gradients live there).
func (m *Model) uploadGrad(p *param) error {
	if err := m.gradBuffer(p); err != nil {
		return err
	}
	if err := m.be.Upload(p.dw, 0, p.grad); err != nil {
		return fmt.Errorf("policy: uploading the gradient of %s: %w", p.spec.Name, err)
	}
	return nil
}

// bufOrNil returns the device weights of p, or nil when p is absent.
func bufOrNil(p *param) backend.Buffer {
	if p == nil {
		return nil
	}
	return p.w
}

// gradOrNil returns the device gradient of p, or nil when p is absent.
func gradOrNil(p *param) backend.Buffer {
	if p == nil {
		return nil
	}
	return p.dw
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
		c.free()
		return nil, fmt.Errorf("%w: the model carries an adapter; clone its base and attach one to the clone", ErrLoRA)
	}
	if err := m.pullHost(false); err != nil {
		c.free()
		return nil, err
	}
	for i, p := range m.params {
		copy(c.params[i].data, p.data)
	}
	return c, nil
}
