package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// PEFT's file names in an adapter folder.
const (
	AdapterConfigFileName  = "adapter_config.json"
	AdapterWeightsFileName = "adapter_model.safetensors"
)

// adapterConfigFile is adapter_config.json as PEFT's LoraConfig writes it
// (save_pretrained), in its key order.
type adapterConfigFile struct {
	AlphaPattern      map[string]float64 `json:"alpha_pattern"`
	AutoMapping       any                `json:"auto_mapping"`
	BaseModel         string             `json:"base_model_name_or_path"`
	Bias              string             `json:"bias"`
	FanInFanOut       bool               `json:"fan_in_fan_out"`
	InferenceMode     bool               `json:"inference_mode"`
	InitLoRAWeights   bool               `json:"init_lora_weights"`
	LayersPattern     any                `json:"layers_pattern"`
	LayersToTransform any                `json:"layers_to_transform"`
	LoRAAlpha         float64            `json:"lora_alpha"`
	LoRADropout       float64            `json:"lora_dropout"`
	ModulesToSave     any                `json:"modules_to_save"`
	PEFTType          string             `json:"peft_type"`
	R                 int                `json:"r"`
	RankPattern       map[string]int     `json:"rank_pattern"`
	Revision          any                `json:"revision"`
	TargetModules     []string           `json:"target_modules"`
	TaskType          string             `json:"task_type"`
	UseDoRA           bool               `json:"use_dora"`
	UseRSLoRA         bool               `json:"use_rslora"`
}

// MarshalAdapterConfig returns adapter_config.json for c as PEFT writes it
// (peft_type "LORA", task_type "CAUSAL_LM", bias "none", lora_dropout 0,
// no modules_to_save, no DoRA): the fields vLLM's PEFTHelper and SGLang's
// LoRAConfig read, and PEFT's from_pretrained loads.
func MarshalAdapterConfig(c LoRAConfig) ([]byte, error) {
	d, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	f := adapterConfigFile{
		AlphaPattern: map[string]float64{}, BaseModel: d.BaseModel, Bias: "none",
		InferenceMode: true, InitLoRAWeights: true, LoRAAlpha: d.Alpha, PEFTType: "LORA",
		R: d.Rank, RankPattern: map[string]int{}, TargetModules: d.TargetModules,
		TaskType: "CAUSAL_LM", UseRSLoRA: d.UseRSLoRA,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ParseAdapterConfig reads a PEFT adapter_config.json into a LoRAConfig.
// r, lora_alpha and target_modules are required (as vLLM's PEFTHelper
// requires them); target_modules is a list of module names or
// "all-linear". What this model cannot reproduce is an error naming the
// field: another peft_type, bias other than "none", DoRA, modules_to_save,
// fan_in_fan_out, layers_to_transform or layers_pattern, rank_pattern or
// alpha_pattern, and target_modules given as a regular expression.
// lora_dropout is accepted and not applied (dropout is inactive at
// inference, and this package trains without it).
func ParseAdapterConfig(data []byte) (LoRAConfig, error) {
	f, err := decodeAdapterConfig(data)
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("%w: %s: %w", ErrLoRA, AdapterConfigFileName, err)
	}
	for _, k := range []struct {
		key     string
		present bool
	}{{"r", f.r.present}, {"lora_alpha", f.loraAlpha.present}, {"target_modules", f.targetModules.present}} {
		if !k.present {
			return LoRAConfig{}, badAdapterField(k.key, "missing")
		}
	}
	var c LoRAConfig
	for _, check := range []func(*LoRAConfig) error{f.readRank, f.readAlpha, f.readTargets, f.readKind, f.readUnsupported, f.readDropout} {
		if err := check(&c); err != nil {
			return c, err
		}
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", AdapterConfigFileName, err)
	}
	return c, nil
}

// adapterConfigIn is adapter_config.json as ParseAdapterConfig reads it:
// the keys it looks at, decoded, before any is checked.
type adapterConfigIn struct {
	r, loraAlpha, loraDropout       adapterKey[float64]
	targetModules                   adapterKey[any]
	peftType, bias, baseModel       adapterKey[string]
	useDoRA, fanInFanOut, useRSLoRA adapterKey[bool]
	// The keys of what this model cannot reproduce, which must be
	// absent, null or empty.
	modulesToSave, layersToTransform, layersPattern, rankPattern, alphaPattern adapterKey[any]
}

// decodeAdapterConfig decodes the keys of the JSON object data into an
// adapterConfigIn. Keys match exactly, as PEFT and vLLM read the file (a
// Python dict): encoding/json's struct decoding would also take "R" for
// "r".
func decodeAdapterConfig(data []byte) (adapterConfigIn, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return adapterConfigIn{}, err
	}
	var f adapterConfigIn
	for key, dst := range map[string]interface{ decode(json.RawMessage) }{
		"r": &f.r, "lora_alpha": &f.loraAlpha, "lora_dropout": &f.loraDropout,
		"target_modules": &f.targetModules, "peft_type": &f.peftType, "bias": &f.bias,
		"base_model_name_or_path": &f.baseModel, "use_dora": &f.useDoRA,
		"fan_in_fan_out": &f.fanInFanOut, "use_rslora": &f.useRSLoRA,
		"modules_to_save": &f.modulesToSave, "layers_to_transform": &f.layersToTransform,
		"layers_pattern": &f.layersPattern, "rank_pattern": &f.rankPattern, "alpha_pattern": &f.alphaPattern,
	} {
		if v, ok := raw[key]; ok {
			dst.decode(v)
		}
	}
	return f, nil
}

// adapterKey is one key of adapter_config.json decoded into T: whether
// it is present (null included), whether it holds a value (present and
// not null), and the error of decoding it, which ParseAdapterConfig
// reports when it reaches the key, so that the checks keep their order.
type adapterKey[T any] struct {
	present, set bool
	v            T
	err          error
}

func (k *adapterKey[T]) decode(raw json.RawMessage) {
	*k = adapterKey[T]{present: true}
	if string(raw) != "null" {
		k.set = true
		k.err = json.Unmarshal(raw, &k.v)
	}
}

// get returns the value (T's zero when absent or null), whether the key
// holds one, and the decoding error, naming the key.
func (k adapterKey[T]) get(key string) (T, bool, error) {
	if k.err != nil {
		return k.v, true, badAdapterField(key, "%v", k.err)
	}
	return k.v, k.set, nil
}

// badAdapterField is ErrLoRA for a field of adapter_config.json.
func badAdapterField(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s: %s", ErrLoRA, AdapterConfigFileName, field, fmt.Sprintf(format, args...))
}

// readRank checks r: a whole number in [1, 2^20].
func (f *adapterConfigIn) readRank(c *LoRAConfig) error {
	r, _, err := f.r.get("r")
	if err != nil {
		return err
	}
	if r != math.Trunc(r) || r < 1 || r > 1<<20 {
		return badAdapterField("r", "%v is not a whole number in [1, 2^20]", r)
	}
	c.Rank = int(r)
	return nil
}

// readAlpha checks lora_alpha: finite and > 0.
func (f *adapterConfigIn) readAlpha(c *LoRAConfig) error {
	a, ok, err := f.loraAlpha.get("lora_alpha")
	if err != nil {
		return err
	}
	if ok {
		c.Alpha = a
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return badAdapterField("lora_alpha", "%v; want a finite value > 0", c.Alpha)
	}
	return nil
}

// readTargets checks target_modules: "all-linear" or a non-empty list of
// names (which LoRAConfig.Validate checks).
func (f *adapterConfigIn) readTargets(c *LoRAConfig) error {
	mods, _, err := f.targetModules.get("target_modules")
	if err != nil { // a number beyond float64
		return err
	}
	switch v := mods.(type) {
	case string:
		if v != LoRAAllLinear {
			return badAdapterField("target_modules", "%q is a regular expression; list the module names instead", v)
		}
		c.TargetModules = []string{LoRAAllLinear}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return badAdapterField("target_modules", "element %v is not a string", x)
			}
			c.TargetModules = append(c.TargetModules, s)
		}
		if len(c.TargetModules) == 0 {
			return badAdapterField("target_modules", "empty")
		}
	default:
		return badAdapterField("target_modules", "want a list of module names or %q", LoRAAllLinear)
	}
	return nil
}

// readKind checks peft_type (LORA, in any case), bias ("none"), use_dora
// and fan_in_fan_out (false), and reads base_model_name_or_path and
// use_rslora.
func (f *adapterConfigIn) readKind(c *LoRAConfig) error {
	if s, ok, err := f.peftType.get("peft_type"); err != nil {
		return err
	} else if ok && !strings.EqualFold(s, "LORA") {
		return badAdapterField("peft_type", "%q; want LORA", s)
	}
	if s, ok, err := f.bias.get("bias"); err != nil {
		return err
	} else if ok && s != "none" {
		return badAdapterField("bias", "%q; only \"none\" is supported", s)
	}
	base, ok, err := f.baseModel.get("base_model_name_or_path")
	if err != nil {
		return err
	}
	if ok {
		c.BaseModel = base
	}
	for _, k := range []struct {
		key string
		v   adapterKey[bool]
	}{{"use_dora", f.useDoRA}, {"fan_in_fan_out", f.fanInFanOut}} {
		if b, ok, err := k.v.get(k.key); err != nil {
			return err
		} else if ok && b {
			return badAdapterField(k.key, "true is not supported")
		}
	}
	rs, ok, err := f.useRSLoRA.get("use_rslora")
	if err != nil {
		return err
	}
	if ok {
		c.UseRSLoRA = rs
	}
	return nil
}

// readUnsupported checks that modules_to_save, layers_to_transform,
// layers_pattern, rank_pattern and alpha_pattern are absent, null or
// empty (a list or an object).
func (f *adapterConfigIn) readUnsupported(*LoRAConfig) error {
	for _, k := range []struct {
		key string
		v   adapterKey[any]
	}{
		{"modules_to_save", f.modulesToSave}, {"layers_to_transform", f.layersToTransform},
		{"layers_pattern", f.layersPattern}, {"rank_pattern", f.rankPattern}, {"alpha_pattern", f.alphaPattern},
	} {
		v, _, err := k.v.get(k.key)
		if err != nil { // a number beyond float64
			return err
		}
		switch x := v.(type) {
		case nil:
			continue
		case []any:
			if len(x) == 0 {
				continue
			}
		case map[string]any:
			if len(x) == 0 {
				continue
			}
		}
		return badAdapterField(k.key, "not supported (every layer's listed modules are adapted alike)")
	}
	return nil
}

// readDropout checks lora_dropout: in [0, 1) when given.
func (f *adapterConfigIn) readDropout(*LoRAConfig) error {
	d, _, err := f.loraDropout.get("lora_dropout")
	if err != nil {
		return err
	}
	if !(d >= 0 && d < 1) {
		return badAdapterField("lora_dropout", "%v; want a value in [0, 1)", d)
	}
	return nil
}

// ReadAdapterConfig reads dir/adapter_config.json.
func ReadAdapterConfig(dir string) (LoRAConfig, error) {
	data, err := os.ReadFile(filepath.Join(dir, AdapterConfigFileName))
	if err != nil {
		return LoRAConfig{}, err
	}
	c, err := ParseAdapterConfig(data)
	if err != nil {
		return LoRAConfig{}, fmt.Errorf("%s: %w", dir, err)
	}
	return c, nil
}

// SaveAdapter writes the model's adapter as a PEFT adapter folder:
// adapter_config.json (MarshalAdapterConfig) and adapter_model.safetensors
// with PEFT's tensor names
// (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight, A as
// [r, in], B as [out, r]) — what PeftModel.from_pretrained, vLLM and
// SGLang load onto the base checkpoint. Each file is written atomically.
func (m *Model) SaveAdapter(dir string, opts lm.AdapterSaveOptions) error {
	dt := opts.DType
	if dt == "" {
		dt = safetensors.F32
	}
	if dt != safetensors.F32 && dt != safetensors.BF16 {
		return fmt.Errorf("%w: adapter dtype %q; want F32 or BF16", ErrInput, dt)
	}
	m.mu.Lock()
	if m.lora == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: the model has no adapter to save", ErrLoRA)
	}
	if err := m.w.pull(false); err != nil {
		m.mu.Unlock()
		return err
	}
	cfg := m.lora.cfg
	tensors := make([]safetensors.Tensor, len(m.lora.params))
	for i, p := range m.lora.params {
		tensors[i] = safetensors.Tensor{Name: p.spec.Name, DType: dt, Shape: p.spec.Shape, Float32: slices.Clone(p.data)}
	}
	m.mu.Unlock()
	if opts.FoldScale {
		cfg.Alpha, cfg.UseRSLoRA = cfg.Scale()*float64(cfg.Rank), false
	}
	js, err := MarshalAdapterConfig(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := safetensors.WriteFile(filepath.Join(dir, AdapterWeightsFileName), tensors, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, AdapterConfigFileName), js, 0o644)
}

// LoadAdapter attaches the PEFT adapter in dir (adapter_config.json and
// adapter_model.safetensors, F32, F16 or BF16) to the model, freezing the
// base weights as AddLoRA does. Every tensor the configuration implies
// must be present with its shape and finite values; a missing, unexpected,
// misshapen or non-finite one is an error that names it, and the model is
// left as it was (everything is read and checked before it changes).
func (m *Model) LoadAdapter(dir string) error {
	cfg, err := ReadAdapterConfig(dir)
	if err != nil {
		return err
	}
	c, err := cfg.WithDefaults()
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	f, err := safetensors.Open(filepath.Join(dir, AdapterWeightsFileName))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrLoRA, dir, err)
	}
	defer f.Close()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrLoRA, dir, fmt.Sprintf(format, args...))
	}
	want := make(map[string]TensorSpec)
	for _, sp := range m.loraSpecs(c) {
		want[sp.a.Name], want[sp.b.Name] = sp.a, sp.b
	}
	for _, info := range f.Tensors() {
		if _, ok := want[info.Name]; !ok {
			return bad("unexpected tensor %s (the config targets %v with rank %d)", info.Name, c.TargetModules, c.Rank)
		}
	}
	values := make(map[string][]float32, len(want))
	for name, spec := range want {
		info, ok := f.Info(name)
		switch {
		case !ok:
			return bad("missing tensor %s", name)
		case !slices.Equal(info.Shape, spec.Shape):
			return bad("tensor %s has shape %v; want %v", name, info.Shape, spec.Shape)
		case !info.DType.IsFloat32Convertible():
			return bad("tensor %s has dtype %s; want F32, F16 or BF16", name, info.DType)
		}
		v := make([]float32, spec.Size())
		if err := f.ReadFloat32(name, v); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrLoRA, dir, err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return bad("tensor %s holds %v at element %d", name, x, i)
			}
		}
		values[name] = v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.attachLoRA(c); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	for _, p := range m.lora.params {
		copy(p.data, values[p.spec.Name])
	}
	return nil
}
