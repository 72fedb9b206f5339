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
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return LoRAConfig{}, fmt.Errorf("%w: %s: %w", ErrLoRA, AdapterConfigFileName, err)
	}
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s: %s", ErrLoRA, AdapterConfigFileName, field, fmt.Sprintf(format, args...))
	}
	get := func(field string, dst any) (bool, error) {
		v, ok := raw[field]
		if !ok || string(v) == "null" {
			return false, nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return true, bad(field, "%v", err)
		}
		return true, nil
	}
	for _, field := range []string{"r", "lora_alpha", "target_modules"} {
		if _, ok := raw[field]; !ok {
			return LoRAConfig{}, bad(field, "missing")
		}
	}
	var c LoRAConfig
	var r float64
	if _, err := get("r", &r); err != nil {
		return c, err
	}
	if r != math.Trunc(r) || r < 1 || r > 1<<20 {
		return c, bad("r", "%v is not a whole number in [1, 2^20]", r)
	}
	c.Rank = int(r)
	if _, err := get("lora_alpha", &c.Alpha); err != nil {
		return c, err
	}
	if !(c.Alpha > 0) || math.IsInf(c.Alpha, 0) {
		return c, bad("lora_alpha", "%v; want a finite value > 0", c.Alpha)
	}
	var mods any
	if _, err := get("target_modules", &mods); err != nil {
		return c, err
	}
	switch v := mods.(type) {
	case string:
		if v != LoRAAllLinear {
			return c, bad("target_modules", "%q is a regular expression; list the module names instead", v)
		}
		c.TargetModules = []string{LoRAAllLinear}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return c, bad("target_modules", "element %v is not a string", x)
			}
			c.TargetModules = append(c.TargetModules, s)
		}
		if len(c.TargetModules) == 0 {
			return c, bad("target_modules", "empty")
		}
	default:
		return c, bad("target_modules", "want a list of module names or %q", LoRAAllLinear)
	}
	var s string
	if ok, err := get("peft_type", &s); err != nil {
		return c, err
	} else if ok && !strings.EqualFold(s, "LORA") {
		return c, bad("peft_type", "%q; want LORA", s)
	}
	if ok, err := get("bias", &s); err != nil {
		return c, err
	} else if ok && s != "none" {
		return c, bad("bias", "%q; only \"none\" is supported", s)
	}
	if _, err := get("base_model_name_or_path", &c.BaseModel); err != nil {
		return c, err
	}
	for _, field := range []string{"use_dora", "fan_in_fan_out"} {
		var b bool
		if ok, err := get(field, &b); err != nil {
			return c, err
		} else if ok && b {
			return c, bad(field, "true is not supported")
		}
	}
	if _, err := get("use_rslora", &c.UseRSLoRA); err != nil {
		return c, err
	}
	for _, field := range []string{"modules_to_save", "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern"} {
		var v any
		if _, err := get(field, &v); err != nil {
			return c, err
		}
		switch x := v.(type) {
		case nil:
		case []any:
			if len(x) > 0 {
				return c, bad(field, "not supported (every layer's listed modules are adapted alike)")
			}
		case map[string]any:
			if len(x) > 0 {
				return c, bad(field, "not supported (every layer's listed modules are adapted alike)")
			}
		default:
			return c, bad(field, "not supported (every layer's listed modules are adapted alike)")
		}
	}
	var dropout float64
	if _, err := get("lora_dropout", &dropout); err != nil {
		return c, err
	}
	if !(dropout >= 0 && dropout < 1) {
		return c, bad("lora_dropout", "%v; want a value in [0, 1)", dropout)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%s: %w", AdapterConfigFileName, err)
	}
	return c, nil
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
