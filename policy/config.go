package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl/internal/atomicfile"
)

// ConfigFileName is the name of a Hugging Face model configuration file.
const ConfigFileName = "config.json"

// ErrConfig marks a config.json that is malformed, lacks a field, or
// describes a model this package cannot run; the message names the field.
var ErrConfig = errors.New("policy: config")

// RopeScaling is config.json "rope_scaling": how rotary position
// frequencies are rescaled for long context (transformers
// modeling_rope_utils.py). Supported types are "default", "linear" and
// "llama3"; others ("dynamic", "yarn", "longrope", ...) are rejected.
type RopeScaling struct {
	// Type is "rope_type" (or the legacy "type").
	Type string
	// Factor divides the frequencies ("linear") or the low frequencies
	// ("llama3").
	Factor float64
	// LowFreqFactor, HighFreqFactor and OriginalMaxPositionEmbeddings are
	// the "llama3" parameters (Llama 3.1/3.2).
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositionEmbeddings int
	// extra keeps the other keys so that writing preserves them.
	extra map[string]json.RawMessage
}

// Config is the architecture of a decoder-only transformer of the Llama
// family as Hugging Face describes it in config.json. ModelType is one of
// the model types that the arch_*.go files register (ModelQwen3,
// ModelQwen2, ModelLlama); each says what its type differs in: defaults,
// the keys it carries, biases, Qwen3's q/k norm.
//
// The zero value is not a valid Config; use ParseConfig or fill every size.
type Config struct {
	ModelType             string
	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int
	HeadDim               int
	MaxPositionEmbeddings int
	RMSNormEps            float64
	RopeTheta             float64
	RopeScaling           *RopeScaling
	TieWordEmbeddings     bool
	// AttentionBias is config.json "attention_bias" (qwen3, llama): biases
	// on q, k, v and o. Qwen2 has fixed biases on q, k, v; see QKVBias.
	AttentionBias bool
	// MLPBias is config.json "mlp_bias" (llama): biases on gate, up, down.
	MLPBias bool
	// BOSTokenID is nil when the config has none.
	BOSTokenID *int
	// EOSTokenIDs holds "eos_token_id", an int or a list in config.json.
	EOSTokenIDs []int
	// TorchDType is "torch_dtype" ("bfloat16", "float32", ...), "" if unset.
	TorchDType string
	// Extra holds the config.json keys Config does not model, written back
	// unchanged by MarshalJSON.
	Extra map[string]json.RawMessage
}

// known lists the keys Config has fields for, and those ParseConfig reads
// and drops (architectures, hidden_act, use_sliding_window,
// rope_parameters); the rest go to Extra. A key here is dropped also by
// a type that does not carry it (qwen2's attention_bias), as Config has no
// place for it; an architecture's key with no field here stays in Extra.
var known = map[string]bool{
	"architectures": true, "model_type": true, "vocab_size": true, "hidden_size": true,
	"intermediate_size": true, "num_hidden_layers": true, "num_attention_heads": true,
	"num_key_value_heads": true, "head_dim": true, "max_position_embeddings": true,
	"rms_norm_eps": true, "rope_theta": true, "rope_scaling": true, "tie_word_embeddings": true,
	"attention_bias": true, "mlp_bias": true, "bos_token_id": true, "eos_token_id": true,
	"torch_dtype": true, "hidden_act": true, "use_sliding_window": true, "rope_parameters": true,
}

// ReadConfig reads dir/config.json.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses a Hugging Face config.json.
//
// The sizes (vocab_size, hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads) are required: transformers would fill a missing one
// with the default of a 7B model, which never matches a checkpoint. Other
// fields take transformers' defaults: num_key_value_heads =
// num_attention_heads, rms_norm_eps 1e-6, rope_theta 10000,
// tie_word_embeddings false, and head_dim and max_position_embeddings as
// the model_type's architecture file says (head_dim
// hidden_size/num_attention_heads unless it says otherwise). The
// architecture reads the keys only its type carries. hidden_act must be
// "silu", and sliding-window attention is rejected.
func ParseConfig(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if raw == nil {
		return Config{}, fmt.Errorf("%w: not a JSON object", ErrConfig)
	}
	p := &fieldParser{raw: raw}
	a, err := readModelType(p)
	if err != nil {
		return Config{}, err
	}
	c := Config{ModelType: a.modelType, RMSNormEps: 1e-6, RopeTheta: 10000}
	if err := c.readShape(p, a); err != nil {
		return Config{}, err
	}
	p.number("rms_norm_eps", &c.RMSNormEps)
	p.number("rope_theta", &c.RopeTheta)
	p.boolean("tie_word_embeddings", &c.TieWordEmbeddings)
	if a.readConfig != nil {
		a.readConfig(p, &c)
	}
	act, sliding := "silu", false
	p.str("hidden_act", &act)
	p.boolean("use_sliding_window", &sliding)
	c.readTokens(p)
	if p.err != nil {
		return Config{}, p.err
	}
	if act != "silu" {
		return Config{}, fmt.Errorf("%w: hidden_act %q is not supported (only \"silu\")", ErrConfig, act)
	}
	if sliding {
		return Config{}, fmt.Errorf("%w: use_sliding_window true is not supported", ErrConfig)
	}
	if err := c.readRope(raw); err != nil {
		return Config{}, err
	}
	c.Extra = extraKeys(raw)
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// readModelType reads the required "model_type" and returns its
// architecture.
func readModelType(p *fieldParser) (architecture, error) {
	if !p.has("model_type") {
		return architecture{}, fmt.Errorf("%w: missing required field \"model_type\"", ErrConfig)
	}
	var t string
	p.str("model_type", &t)
	if p.err != nil {
		return architecture{}, p.err
	}
	return lookupArch(t)
}

// readShape reads the sizes: the five required ones, num_key_value_heads,
// head_dim and max_position_embeddings with a's defaults. A missing
// required size is returned at once; a mistyped one is left in p.
func (c *Config) readShape(p *fieldParser, a architecture) error {
	for _, f := range []struct {
		key string
		dst *int
	}{
		{"vocab_size", &c.VocabSize}, {"hidden_size", &c.HiddenSize},
		{"intermediate_size", &c.IntermediateSize}, {"num_hidden_layers", &c.NumHiddenLayers},
		{"num_attention_heads", &c.NumAttentionHeads},
	} {
		if !p.has(f.key) {
			return fmt.Errorf("%w: missing required field %q", ErrConfig, f.key)
		}
		p.integer(f.key, f.dst)
	}
	c.NumKeyValueHeads = c.NumAttentionHeads
	p.integer("num_key_value_heads", &c.NumKeyValueHeads)
	c.HeadDim = a.headDim
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
		if !p.has("head_dim") && c.HiddenSize%c.NumAttentionHeads != 0 {
			return fmt.Errorf("%w: hidden_size %d is not a multiple of num_attention_heads %d and head_dim is absent", ErrConfig, c.HiddenSize, c.NumAttentionHeads)
		}
	}
	p.integer("head_dim", &c.HeadDim)
	c.MaxPositionEmbeddings = a.maxPositions
	p.integer("max_position_embeddings", &c.MaxPositionEmbeddings)
	return nil
}

// readTokens reads torch_dtype, bos_token_id (null or absent: none) and
// eos_token_id (an integer or a list).
func (c *Config) readTokens(p *fieldParser) {
	p.str("torch_dtype", &c.TorchDType)
	if p.has("bos_token_id") {
		var id int
		p.integer("bos_token_id", &id)
		if p.err == nil && string(p.raw["bos_token_id"]) != "null" {
			c.BOSTokenID = &id
		}
	}
	c.EOSTokenIDs = p.intOrList("eos_token_id")
}

// readRope reads rope_scaling, or rope_parameters, which transformers v5
// writes instead of rope_theta and rope_scaling (both in one object).
func (c *Config) readRope(raw map[string]json.RawMessage) error {
	if rs, ok := raw["rope_scaling"]; ok && string(rs) != "null" {
		s, err := parseRopeScaling("rope_scaling", rs)
		if err != nil {
			return err
		}
		c.RopeScaling = s
	}
	rp, ok := raw["rope_parameters"]
	if !ok || string(rp) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rp, &m); err != nil || m == nil {
		return fmt.Errorf("%w: rope_parameters is not an object", ErrConfig)
	}
	q := fieldParser{raw: m, prefix: "rope_parameters."}
	q.number("rope_theta", &c.RopeTheta)
	if q.err != nil {
		return q.err
	}
	s, err := parseRopeScaling("rope_parameters", rp)
	if err != nil {
		return err
	}
	if s.Type != "default" {
		c.RopeScaling = s
	}
	return nil
}

// extraKeys returns the keys of raw that Config does not model (nil when
// there are none).
func extraKeys(raw map[string]json.RawMessage) map[string]json.RawMessage {
	var extra map[string]json.RawMessage
	for k, v := range raw {
		if !known[k] {
			if extra == nil {
				extra = make(map[string]json.RawMessage)
			}
			extra[k] = v
		}
	}
	return extra
}

func parseRopeScaling(field string, data json.RawMessage) (*RopeScaling, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("%w: %s is not an object", ErrConfig, field)
	}
	p := fieldParser{raw: raw, prefix: field + "."}
	s := &RopeScaling{}
	if p.has("rope_type") {
		p.str("rope_type", &s.Type)
	} else if p.has("type") {
		p.str("type", &s.Type)
	} else {
		return nil, fmt.Errorf("%w: missing required field \"%s.rope_type\"", ErrConfig, field)
	}
	switch s.Type {
	case "default":
	case "linear":
		p.required("factor")
		p.number("factor", &s.Factor)
	case "llama3":
		for _, k := range []string{"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"} {
			p.required(k)
		}
		p.number("factor", &s.Factor)
		p.number("low_freq_factor", &s.LowFreqFactor)
		p.number("high_freq_factor", &s.HighFreqFactor)
		p.integer("original_max_position_embeddings", &s.OriginalMaxPositionEmbeddings)
	default:
		if p.err == nil {
			return nil, fmt.Errorf("%w: %s type %q is not supported (default, linear, llama3)", ErrConfig, field, s.Type)
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	for k, v := range raw {
		switch k {
		case "rope_type", "type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "rope_theta":
		default:
			if s.extra == nil {
				s.extra = make(map[string]json.RawMessage)
			}
			s.extra[k] = v
		}
	}
	return s, nil
}

// maxDim bounds every size of a config, far above any real model (the
// largest vocabularies are ~262k), so that products such as the parameter
// count cannot overflow int64.
const maxDim = 1 << 20

// Validate checks that the model_type is registered, that the sizes are
// positive, bounded and consistent, and what the architecture requires
// of the keys only its type carries.
func (c Config) Validate() error {
	a, err := lookupArch(c.ModelType)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		v   int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim}, {"max_position_embeddings", c.MaxPositionEmbeddings},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%w: %s = %d, want > 0", ErrConfig, f.key, f.v)
		}
		if f.v > maxDim {
			return fmt.Errorf("%w: %s = %d exceeds %d", ErrConfig, f.key, f.v, maxDim)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("%w: num_attention_heads %d is not a multiple of num_key_value_heads %d", ErrConfig, c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("%w: head_dim %d is odd; rotary embeddings need pairs", ErrConfig, c.HeadDim)
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		return fmt.Errorf("%w: rms_norm_eps = %g, want a finite value > 0", ErrConfig, c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("%w: rope_theta = %g, want a finite value > 0", ErrConfig, c.RopeTheta)
	}
	if s := c.RopeScaling; s != nil {
		switch s.Type {
		case "default":
		case "linear", "llama3":
			if !(s.Factor > 0) || math.IsInf(s.Factor, 0) {
				return fmt.Errorf("%w: rope_scaling.factor = %g, want a finite value > 0", ErrConfig, s.Factor)
			}
			if s.Type == "llama3" && !(s.HighFreqFactor > s.LowFreqFactor && s.LowFreqFactor > 0 && s.OriginalMaxPositionEmbeddings > 0) {
				return fmt.Errorf("%w: rope_scaling llama3 needs 0 < low_freq_factor (%g) < high_freq_factor (%g) and original_max_position_embeddings (%d) > 0",
					ErrConfig, s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositionEmbeddings)
			}
		default:
			return fmt.Errorf("%w: rope_scaling type %q is not supported (default, linear, llama3)", ErrConfig, s.Type)
		}
	}
	if a.validate != nil {
		return a.validate(c)
	}
	return nil
}

// QKVBias reports whether q_proj, k_proj and v_proj have biases.
func (c Config) QKVBias() bool { return c.parts().qkvBias }

// OutBias reports whether o_proj has a bias (never for qwen2).
func (c Config) OutBias() bool { return c.parts().outBias }

// QKNorm reports whether each attention head RMS-normalises its queries and
// keys before RoPE (Qwen3's q_norm, k_norm, of size head_dim).
func (c Config) QKNorm() bool { return c.parts().qkNorm }

// Architecture is the transformers class name, e.g. "Qwen3ForCausalLM".
func (c Config) Architecture() string { return c.arch().class }

// MarshalJSON writes the config in Hugging Face's format: the keys
// transformers reads for the model_type (the shared ones, then those the
// architecture writes), plus the keys of Extra not written already, sorted
// by key and indented by two spaces as PretrainedConfig.to_json_string
// writes them.
func (c Config) MarshalJSON() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := map[string]any{
		"architectures":           []string{c.Architecture()},
		"model_type":              c.ModelType,
		"vocab_size":              c.VocabSize,
		"hidden_size":             c.HiddenSize,
		"intermediate_size":       c.IntermediateSize,
		"num_hidden_layers":       c.NumHiddenLayers,
		"num_attention_heads":     c.NumAttentionHeads,
		"num_key_value_heads":     c.NumKeyValueHeads,
		"head_dim":                c.HeadDim,
		"max_position_embeddings": c.MaxPositionEmbeddings,
		"rms_norm_eps":            pyFloat(c.RMSNormEps),
		"rope_theta":              pyFloat(c.RopeTheta),
		"tie_word_embeddings":     c.TieWordEmbeddings,
		"hidden_act":              "silu",
		"rope_scaling":            c.RopeScaling.jsonValue(),
	}
	if c.BOSTokenID != nil {
		m["bos_token_id"] = *c.BOSTokenID
	}
	switch len(c.EOSTokenIDs) {
	case 0:
	case 1:
		m["eos_token_id"] = c.EOSTokenIDs[0]
	default:
		m["eos_token_id"] = c.EOSTokenIDs
	}
	if c.TorchDType != "" {
		m["torch_dtype"] = c.TorchDType
	}
	if a := c.arch(); a.writeConfig != nil {
		a.writeConfig(c, m)
	}
	for k, v := range c.Extra {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil { // map keys are sorted
		return nil, err
	}
	return buf.Bytes(), nil
}

// jsonValue is s as config.json's "rope_scaling" holds it: null for
// none, else rope_type with the parameters of that type and the other
// keys read with it.
func (s *RopeScaling) jsonValue() any {
	if s == nil {
		return nil
	}
	rs := make(map[string]any, len(s.extra)+5)
	for k, v := range s.extra {
		rs[k] = v
	}
	rs["rope_type"] = s.Type
	switch s.Type {
	case "linear":
		rs["factor"] = pyFloat(s.Factor)
	case "llama3":
		rs["factor"] = pyFloat(s.Factor)
		rs["low_freq_factor"] = pyFloat(s.LowFreqFactor)
		rs["high_freq_factor"] = pyFloat(s.HighFreqFactor)
		rs["original_max_position_embeddings"] = s.OriginalMaxPositionEmbeddings
	}
	return rs
}

// pyFloat is a float written as Python's repr writes it (json.dumps uses
// repr): "8.0" rather than "8", "1e-06" rather than "0.000001", so that
// transformers sees floats where it expects them (its rope_scaling
// validation checks isinstance(factor, float)).
type pyFloat float64

// MarshalJSON implements json.Marshaler.
func (f pyFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("%w: %g cannot be written as JSON", ErrConfig, v)
	}
	if v == 0 {
		return []byte("0.0"), nil
	}
	// Shortest round-trip digits d.ddd and exponent, as repr chooses them.
	e := strconv.FormatFloat(v, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if decpt := exp + 1; decpt <= -4 || decpt > 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return []byte(fmt.Sprintf("%se%s%02d", mant, sign, exp)), nil
	}
	out := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(out, ".") {
		out += ".0"
	}
	return []byte(out), nil
}

// UnmarshalJSON parses config.json content; see ParseConfig.
func (c *Config) UnmarshalJSON(data []byte) error {
	p, err := ParseConfig(data)
	if err != nil {
		return err
	}
	*c = p
	return nil
}

// WriteConfig writes c to dir/config.json, atomically and durably
// (internal/atomicfile): a reader never sees a half-written file.
func WriteConfig(dir string, c Config) error {
	data, err := c.MarshalJSON()
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ConfigFileName), data, 0o644); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return nil
}

// fieldParser decodes typed fields of a JSON object, keeping the first
// error, which names the field.
type fieldParser struct {
	raw    map[string]json.RawMessage
	prefix string
	err    error
}

func (p *fieldParser) has(key string) bool { _, ok := p.raw[key]; return ok }

func (p *fieldParser) required(key string) {
	if p.err == nil && !p.has(key) {
		p.err = fmt.Errorf("%w: missing required field %q", ErrConfig, p.prefix+key)
	}
}

func (p *fieldParser) decode(key string, dst any, what string) {
	v, ok := p.raw[key]
	if !ok || p.err != nil || string(v) == "null" {
		return
	}
	if err := json.Unmarshal(v, dst); err != nil {
		p.err = fmt.Errorf("%w: field %q = %s is not %s", ErrConfig, p.prefix+key, v, what)
	}
}

func (p *fieldParser) str(key string, dst *string)     { p.decode(key, dst, "a string") }
func (p *fieldParser) boolean(key string, dst *bool)   { p.decode(key, dst, "a boolean") }
func (p *fieldParser) number(key string, dst *float64) { p.decode(key, dst, "a number") }

// integer accepts an integral JSON number, also written as 2.0.
func (p *fieldParser) integer(key string, dst *int) {
	var f float64
	v, ok := p.raw[key]
	if !ok || p.err != nil || string(v) == "null" {
		return
	}
	p.decode(key, &f, "an integer")
	if p.err != nil {
		return
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		p.err = fmt.Errorf("%w: field %q = %s is not an integer", ErrConfig, p.prefix+key, v)
		return
	}
	*dst = int(f)
}

func (p *fieldParser) intOrList(key string) []int {
	v, ok := p.raw[key]
	if !ok || p.err != nil || string(v) == "null" {
		return nil
	}
	var one int
	if json.Unmarshal(v, &one) == nil {
		return []int{one}
	}
	var list []int
	if err := json.Unmarshal(v, &list); err != nil {
		p.err = fmt.Errorf("%w: field %q = %s is not an integer or a list of integers", ErrConfig, p.prefix+key, v)
	}
	return list
}

// TensorSpec is the name and shape of one weight of a checkpoint, as
// Hugging Face names it in safetensors files.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Size is the number of elements.
func (t TensorSpec) Size() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// TensorSpecs lists the weights the config implies, in the order of the
// model's state_dict (transformers' Qwen3ForCausalLM, Qwen2ForCausalLM,
// LlamaForCausalLM): model.embed_tokens.weight; per layer i the
// self_attn.{q,k,v,o}_proj weights (and biases), Qwen3's q_norm/k_norm,
// mlp.{gate,up,down}_proj, input_layernorm and post_attention_layernorm;
// model.norm.weight; and lm_head.weight unless the embeddings are tied.
// Linear weights have the shape [out, in], as torch.nn.Linear stores them.
func (c Config) TensorSpecs() []TensorSpec {
	_, params := layout(c)
	specs := make([]TensorSpec, len(params))
	for i, p := range params {
		specs[i] = p.spec
	}
	return specs
}

// NumParams is the number of distinct parameters (tied embeddings counted
// once), as sum(p.numel() for p in model.parameters()) reports it.
func (c Config) NumParams() int64 {
	var n int64
	for _, t := range c.TensorSpecs() {
		n += t.Size()
	}
	return n
}

// CheckTensors compares a checkpoint's tensor shapes with the config: every
// expected tensor must be present with its shape. A tied checkpoint may
// also carry lm_head.weight (transformers writes it for some models); any
// other unexpected name is an error. shapes maps names to shapes.
func (c Config) CheckTensors(shapes map[string][]int) error {
	var errs []error
	want := c.TensorSpecs()
	expected := make(map[string]bool, len(want))
	for _, t := range want {
		expected[t.Name] = true
		got, ok := shapes[t.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("missing tensor %s %v", t.Name, t.Shape))
			continue
		}
		if !equalInts(got, t.Shape) {
			errs = append(errs, fmt.Errorf("tensor %s has shape %v, config implies %v", t.Name, got, t.Shape))
		}
	}
	var extra []string
	for name, shape := range shapes {
		if expected[name] {
			continue
		}
		if name == "lm_head.weight" && c.TieWordEmbeddings && equalInts(shape, []int{c.VocabSize, c.HiddenSize}) {
			continue
		}
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		errs = append(errs, fmt.Errorf("unexpected tensor %s %v", name, shapes[name]))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: checkpoint does not match config: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// denseParams is verl's dense_N: the parameters that take part in a matmul
// per token, with the embedding counted like the lm_head
// (verl/utils/flops_counter.py, _estimate_qwen2_flops).
func (c Config) denseParams() float64 {
	h := float64(c.HiddenSize)
	q := float64(c.NumAttentionHeads * c.HeadDim)
	kv := float64(c.NumKeyValueHeads * c.HeadDim)
	mlp := 3 * h * float64(c.IntermediateSize)
	attn := h * (q + 2*kv + q)
	return (mlp+attn)*float64(c.NumHiddenLayers) + 2*float64(c.VocabSize)*h
}

// TrainingFLOPs is the forward-plus-backward FLOPs of one pass over a batch
// of sequences with the given lengths, counted exactly as verl counts them
// for its perf/mfu metrics (verl/utils/flops_counter.py,
// _estimate_qwen2_flops, which verl also uses for llama and qwen3):
// 6·N·tokens for the dense parameters N (embedding and lm_head both
// counted) plus 12·Σ s²·head_dim·heads·layers for attention scores and
// values (full, not causal, squares). So MFU numbers compare with verl's.
func (c Config) TrainingFLOPs(seqLens []int) float64 {
	var tokens, sq float64
	for _, s := range seqLens {
		tokens += float64(s)
		sq += float64(s) * float64(s)
	}
	attn := 12 * sq * float64(c.HeadDim*c.NumAttentionHeads*c.NumHiddenLayers)
	return 6*c.denseParams()*tokens + attn
}

// TrainingFLOPsCausal is TrainingFLOPs with causal attention counted as
// what it computes: each query sees the keys up to itself, half of the s²
// pairs (s(s+1)/2, taken here as s²/2 as FlashAttention's benchmarks and
// torch's SDPA FLOP counter do), so the attention term is
// 6·Σ s²·head_dim·heads·layers instead of verl's 12·Σ s². An MFU from it
// is the share of the device's peak spent on arithmetic the model needs;
// verl's count (TrainingFLOPs) is the one its perf/mfu reports.
func (c Config) TrainingFLOPsCausal(seqLens []int) float64 {
	var tokens, sq float64
	for _, s := range seqLens {
		tokens += float64(s)
		sq += float64(s) * float64(s)
	}
	attn := 6 * sq * float64(c.HeadDim*c.NumAttentionHeads*c.NumHiddenLayers)
	return 6*c.denseParams()*tokens + attn
}

// ForwardFLOPs is the forward-only share of TrainingFLOPs, one third of it
// (the backward pass costs two forwards in this count).
func (c Config) ForwardFLOPs(seqLens []int) float64 { return c.TrainingFLOPs(seqLens) / 3 }

// ForwardFLOPsPerToken is the forward FLOPs per token of a sequence of
// length seqLen: 2·N + 4·seqLen·head_dim·heads·layers.
func (c Config) ForwardFLOPsPerToken(seqLen int) float64 {
	if seqLen <= 0 {
		return 0
	}
	return c.ForwardFLOPs([]int{seqLen}) / float64(seqLen)
}

// RopeInvFreq returns the head_dim/2 rotary inverse frequencies, after
// rope_scaling, as transformers computes them (modeling_rope_utils.py:
// _compute_default_rope_parameters, _compute_linear_scaling_rope_parameters,
// _compute_llama3_parameters): inv_freq[i] = rope_theta^(-2i/head_dim),
// divided by factor for "linear"; for "llama3", wavelengths 2π/inv_freq
// longer than original_max_position_embeddings/low_freq_factor are divided
// by factor, those shorter than .../high_freq_factor are kept, and those
// in between are interpolated with
// s = (original_max_position_embeddings/wavelen - low_freq_factor) /
// (high_freq_factor - low_freq_factor) as (1-s)·f/factor + s·f.
// transformers computes in float32; these are float64.
func (c Config) RopeInvFreq() []float64 {
	d := c.HeadDim
	inv := make([]float64, d/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(d))
	}
	s := c.RopeScaling
	if s == nil {
		return inv
	}
	switch s.Type {
	case "linear":
		for i := range inv {
			inv[i] /= s.Factor
		}
	case "llama3":
		old := float64(s.OriginalMaxPositionEmbeddings)
		lowWavelen := old / s.LowFreqFactor
		highWavelen := old / s.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			switch {
			case wavelen < highWavelen:
			case wavelen > lowWavelen:
				inv[i] = f / s.Factor
			default:
				smooth := (old/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				inv[i] = (1-smooth)*f/s.Factor + smooth*f
			}
		}
	}
	return inv
}
