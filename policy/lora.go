package policy

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// ErrLoRA marks a LoRA configuration, adapter file or operation the model
// cannot use; the message names the field, tensor or state at fault.
var ErrLoRA = errors.New("policy: invalid LoRA")

// The projections of a decoder layer that LoRA can adapt, with the module
// names that PEFT's target_modules, vLLM and SGLang use.
const (
	LoRAQProj    = "q_proj"
	LoRAKProj    = "k_proj"
	LoRAVProj    = "v_proj"
	LoRAOProj    = "o_proj"
	LoRAGateProj = "gate_proj"
	LoRAUpProj   = "up_proj"
	LoRADownProj = "down_proj"
)

// LoRAAllLinear is PEFT's shorthand target_modules value for every linear
// projection of the decoder layers (the LM head excluded).
const LoRAAllLinear = "all-linear"

// loraModules lists the adaptable projections in a fixed order: the index
// of a module in this list is its slot in loraLayer.
var loraModules = [...]string{LoRAQProj, LoRAKProj, LoRAVProj, LoRAOProj, LoRAGateProj, LoRAUpProj, LoRADownProj}

// numLoRASlots is the number of adaptable projections per layer.
const numLoRASlots = len(loraModules)

// LoRAConfig describes low-rank adapters (Hu et al., 2021,
// arXiv:2106.09685) on the projections of every decoder layer: the
// adapted projection computes y = x·Wᵀ + scale·(x·Aᵀ)·Bᵀ with W frozen,
// A [Rank, in] and B [out, Rank] trained, and scale = Alpha/Rank, or
// Alpha/√Rank with rsLoRA (Kalajdzievski, 2023, arXiv:2312.03732) — the
// scaling of PEFT's LoraLayer.update_layer and vLLM's PEFTHelper.
//
// There is no dropout: PEFT's lora_dropout is 0 here, as verl's and
// TRL's RL recipes set it, because the log-probabilities the trainer
// recomputes must be those of the policy that sampled. Biases are not
// adapted (PEFT's bias "none").
type LoRAConfig struct {
	// Rank is r, the inner dimension of A and B; it must be ≥ 1. vLLM's
	// and SGLang's servers refuse adapters above their --max-lora-rank.
	Rank int
	// Alpha is PEFT's lora_alpha; 0 means Alpha = Rank (scale 1, or √Rank
	// with rsLoRA). PEFT's LoraConfig defaults to 8 and verl's examples to
	// 16 or 32: give the value the recipe names.
	Alpha float64
	// TargetModules names the adapted projections: any of "q_proj",
	// "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
	// or "all-linear" for all seven. Empty means q_proj and v_proj, PEFT's
	// default for Qwen and Llama.
	TargetModules []string
	// UseRSLoRA scales by Alpha/√Rank instead of Alpha/Rank.
	UseRSLoRA bool
	// BaseModel is written to adapter_config.json as
	// base_model_name_or_path (a Hub id or the base checkpoint's folder);
	// it is not interpreted.
	BaseModel string
}

// WithDefaults returns c with its zero fields filled in (Alpha = Rank,
// TargetModules = q_proj and v_proj) and "all-linear" expanded: the
// module list comes back deduplicated in the layer's order (q, k, v, o,
// gate, up, down), as Model.LoRA reports it. An unusable field is an
// error wrapping ErrLoRA.
func (c LoRAConfig) WithDefaults() (LoRAConfig, error) {
	if c.Rank < 1 {
		return c, fmt.Errorf("%w: rank %d; want ≥ 1", ErrLoRA, c.Rank)
	}
	if c.Alpha == 0 {
		c.Alpha = float64(c.Rank)
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return c, fmt.Errorf("%w: lora_alpha %g; want a finite value > 0", ErrLoRA, c.Alpha)
	}
	mods := c.TargetModules
	if len(mods) == 0 {
		mods = []string{LoRAQProj, LoRAVProj}
	}
	var want [numLoRASlots]bool
	for _, name := range mods {
		if name == LoRAAllLinear {
			for i := range want {
				want[i] = true
			}
			continue
		}
		i := slices.Index(loraModules[:], name)
		if i < 0 {
			return c, fmt.Errorf("%w: target module %q; want one of %v or %q", ErrLoRA, name, loraModules, LoRAAllLinear)
		}
		want[i] = true
	}
	c.TargetModules = nil
	for i, ok := range want {
		if ok {
			c.TargetModules = append(c.TargetModules, loraModules[i])
		}
	}
	return c, nil
}

// Validate reports whether c can be used; the zero fields take their
// defaults.
func (c LoRAConfig) Validate() error {
	_, err := c.WithDefaults()
	return err
}

// Scale is the factor of the low-rank update: Alpha/Rank, or Alpha/√Rank
// with UseRSLoRA (PEFT's LoraLayer.scaling); 0 for an invalid config.
func (c LoRAConfig) Scale() float64 {
	d, err := c.WithDefaults()
	if err != nil {
		return 0
	}
	if d.UseRSLoRA {
		return d.Alpha / math.Sqrt(float64(d.Rank))
	}
	return d.Alpha / float64(d.Rank)
}

// loraState is the model's adapter: its configuration and its A and B
// tensors; each adapted projection (linear) points to its pair.
type loraState struct {
	cfg    LoRAConfig // with defaults filled in
	params []*param   // A and B of every adapted projection, in PEFT's order
	merged bool       // the deltas are folded into the base weights
	// snapshot holds A and B as MergeLoRA folded them, for UnmergeLoRA.
	snapshot map[*param][]float32
}

// loraPair is one adapted projection's A [r, in] and B [out, r], and the
// update's scale.
type loraPair struct {
	a, b  *param
	scale float32
}

// rank is r.
func (p *loraPair) rank() int { return p.a.spec.Shape[0] }

// loraTensorName is PEFT's name of an adapter tensor in
// adapter_model.safetensors: the Hugging Face module path under
// base_model.model., then lora_A or lora_B (the adapter's own name,
// "default", is dropped on save).
func loraTensorName(path, ab string) string {
	return "base_model.model." + path + ".lora_" + ab + ".weight"
}

// forEachAdapter calls f with every projection that carries an adapter,
// layer by layer, in the order q, k, v, o, gate, up, down.
func (m *Model) forEachAdapter(f func(*linear)) {
	for i := range m.net.layers {
		for slot := range numLoRASlots {
			if lin := m.net.layers[i].projection(slot); lin.lora != nil {
				f(lin)
			}
		}
	}
}

// AddLoRA attaches freshly initialised adapters to the projections cfg
// names and freezes every base weight: from then on Params lists only the
// adapters (so the optimizer keeps state for them alone), backward skips
// the base weights' gradients, and Save writes the merged weights. A is
// drawn as PEFT's default init (kaiming_uniform with a = √5, that is
// uniform on ±1/√in) from seed, B is zero, so the model computes exactly
// what it did before until B moves. A model has at most one adapter.
func (m *Model) AddLoRA(cfg LoRAConfig, seed uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.attachLoRA(cfg); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))
	m.forEachAdapter(func(lin *linear) {
		a := lin.lora.a // B stays zero
		bound := 1 / math.Sqrt(float64(a.spec.Shape[1]))
		for i := range a.data {
			a.data[i] = float32((2*rng.Float64() - 1) * bound)
		}
	})
	return nil
}

// loraSpec is one adapted projection's A and B tensors.
type loraSpec struct {
	proj *linear
	a, b TensorSpec
}

// loraSpecs lists the adapter tensors c implies on this model, in PEFT's
// order (layer by layer, q … down, A before B).
func (m *Model) loraSpecs(c LoRAConfig) []loraSpec {
	var out []loraSpec
	for i := range m.net.layers {
		for slot := range numLoRASlots {
			if !slices.Contains(c.TargetModules, loraModules[slot]) {
				continue
			}
			lin := m.net.layers[i].projection(slot)
			out = append(out, loraSpec{proj: lin,
				a: TensorSpec{Name: loraTensorName(lin.path, "A"), Shape: []int{c.Rank, lin.in}},
				b: TensorSpec{Name: loraTensorName(lin.path, "B"), Shape: []int{lin.out, c.Rank}}})
		}
	}
	return out
}

// attachLoRA allocates zero adapters for cfg and freezes the base weights;
// every check comes before the first change to the model. The caller
// holds m.mu.
func (m *Model) attachLoRA(cfg LoRAConfig) error {
	c, err := cfg.WithDefaults()
	if err != nil {
		return err
	}
	if m.lora != nil {
		return fmt.Errorf("%w: the model already has an adapter", ErrLoRA)
	}
	if m.w.closed() {
		return fmt.Errorf("%w: the model is closed", ErrInput)
	}
	st := &loraState{cfg: c}
	scale := float32(c.Scale())
	specs := m.loraSpecs(c)
	pairs := make([]*loraPair, len(specs))
	fail := func(err error) error {
		for _, p := range st.params {
			_ = m.be.Free(p.w)
		}
		return err
	}
	for i, sp := range specs {
		pair := &loraPair{a: &param{spec: sp.a}, b: &param{spec: sp.b}, scale: scale}
		for _, p := range []*param{pair.a, pair.b} {
			if err := m.w.alloc(p); err != nil {
				return fail(err)
			}
			st.params = append(st.params, p)
		}
		pairs[i] = pair
	}
	// The base is frozen from the host copies (freezeBase uploads
	// them): they must hold the newest weights — after a step on the
	// backend, or when the backend drew them (WithBackendInit).
	if err := m.w.pull(false); err != nil {
		return fail(err)
	}
	if m.w.onBackend {
		// A new stage (RL with adapters after full SFT): the full
		// weights' optimizer ends, the host takes the weights back, and
		// the adapters' trainer makes its own optimizer.
		m.endDeviceOptimizer()
		m.w.moveToHost()
	}
	for i, sp := range specs {
		sp.proj.lora = pairs[i]
	}
	m.w.freezeBase(st.params)
	m.lora = st
	m.adapterChanged()
	return nil
}

// adapterChanged records that the function the model computes changed
// shape (an adapter attached, merged or unmerged): frozen weights are
// uploaded again, the sessions' KV caches (computed by the old function)
// are dropped, and a backward pending from before fails instead of
// mixing the two. The caller holds m.mu, so no generation is running.
func (m *Model) adapterChanged() {
	m.w.hostWritten()
	m.loraEpoch++
	m.gen.Reset()
}

// LoRA returns the adapter's configuration (defaults filled in) and
// whether the model has one.
func (m *Model) LoRA() (LoRAConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lora == nil {
		return LoRAConfig{}, false
	}
	c := m.lora.cfg
	c.TargetModules = slices.Clone(c.TargetModules)
	return c, true
}

// HasAdapter reports whether the model carries a LoRA adapter, which
// SaveAdapter needs.
func (m *Model) HasAdapter() bool {
	_, ok := m.LoRA()
	return ok
}

// MergeLoRA folds the adapter into the base weights, W += scale·B·A, as
// PEFT's merge(): the model computes the same function without the extra
// products (faster generation), until UnmergeLoRA. Training needs the
// adapter unmerged; Forward with gradients on a merged model is an error.
func (m *Model) MergeLoRA() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lora == nil {
		return fmt.Errorf("%w: the model has no adapter to merge", ErrLoRA)
	}
	if m.lora.merged {
		return fmt.Errorf("%w: the adapter is already merged", ErrLoRA)
	}
	if err := m.foldLoRA(1); err != nil {
		return err
	}
	m.lora.merged = true
	return nil
}

// UnmergeLoRA subtracts the adapter merged by MergeLoRA from the base
// weights (PEFT's unmerge()): the adapter as it was merged, even if it
// moved since. The base weights come back up to float32 rounding of the
// add and subtract, as in PEFT.
func (m *Model) UnmergeLoRA() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lora == nil || !m.lora.merged {
		return fmt.Errorf("%w: no merged adapter to unmerge", ErrLoRA)
	}
	if err := m.foldLoRA(-1); err != nil {
		return err
	}
	m.lora.merged = false
	return nil
}

// foldLoRA adds sign·scale·B·A to every adapted base weight on the host.
// Merging snapshots A and B, and unmerging subtracts the snapshot: the
// adapter may have moved meanwhile (an optimizer's momentum, a restore),
// and the base must come back to what it was.
func (m *Model) foldLoRA(sign float64) error {
	if err := m.w.pull(false); err != nil {
		return err
	}
	st := m.lora
	if sign > 0 {
		st.snapshot = make(map[*param][]float32, len(st.params))
		for _, p := range st.params {
			st.snapshot[p] = slices.Clone(p.data)
		}
	}
	m.forEachAdapter(func(lin *linear) {
		p := lin.lora
		addLoRADelta(lin.w.data, st.snapshot[p.a], st.snapshot[p.b], p, sign*float64(p.scale))
	})
	if sign < 0 {
		st.snapshot = nil
	}
	m.adapterChanged()
	return nil
}

// addLoRADelta adds s·B·A to w [out, in] with A and B's values a and b,
// each element's dot product over the rank accumulated in float64.
func addLoRADelta(w, a, b []float32, pair *loraPair, s float64) {
	r, in := pair.a.spec.Shape[0], pair.a.spec.Shape[1]
	out := pair.b.spec.Shape[0]
	for o := range out {
		row := w[o*in : (o+1)*in]
		bo := b[o*r : (o+1)*r]
		for i := range row {
			var acc float64
			for k, bv := range bo {
				acc += float64(bv) * float64(a[k*in+i])
			}
			row[i] = float32(float64(row[i]) + s*acc)
		}
	}
}
