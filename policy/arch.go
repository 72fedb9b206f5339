package policy

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/agentrl/agentrl/policy/backend"
)

// architecture is one config.json model_type of the Llama family: its
// transformers class, the defaults of its transformers config class, how
// it reads and writes the config.json keys that are its own, and which
// optional parts its decoder layers have. Everything else is shared by
// the family: the keys every type carries (sizes, norms, RoPE, tokens),
// the layout below with its Hugging Face tensor names, the modules, Load
// and Save.
//
// Adding a Llama-family variant is one new file, arch_<name>.go, holding
//
//   - its model_type as an exported constant (like ModelQwen3);
//   - an architecture value: modelType, class, headDim and maxPositions,
//     readConfig and writeConfig for the keys only it carries, validate
//     for what they must satisfy, and parts for its layers;
//   - func init() { register(theValue) }.
//
// ParseConfig, Validate, MarshalJSON (so WriteConfig and Save), layout,
// TensorSpecs, New, Load, and the errors that list the model types pick it
// up; no other file changes. A key of its own that Config has no field
// for stays in Config.Extra, which MarshalJSON writes back as read; parts
// and validate read it there (arch_variant_test.go registers such a type
// in the tests). A variant whose layers need a part that layerParts lacks
// (another norm, another MLP, fused projections) is more than one file:
// the part goes into layerParts, layout and the modules.
type architecture struct {
	// modelType is config.json's "model_type".
	modelType string
	// class is config.json's "architectures" entry.
	class string
	// headDim is head_dim when config.json has none; 0 means
	// hidden_size / num_attention_heads, which must then divide evenly.
	headDim int
	// maxPositions is max_position_embeddings when config.json has none.
	maxPositions int
	// readConfig, when set, reads the keys only this type carries into
	// c, reporting a mistyped value through p. It runs after the shared
	// keys of sizes, norm, RoPE and embeddings are read.
	readConfig func(p *fieldParser, c *Config)
	// writeConfig, when set, writes the keys only this type carries into
	// m, the config.json object under construction, which already holds
	// the shared keys; it may delete a shared key the type's config class
	// does not have. Config.Extra fills the keys left unwritten.
	writeConfig func(c Config, m map[string]any)
	// validate, when set, checks what this type's keys must satisfy; it
	// runs at the end of Config.Validate.
	validate func(c Config) error
	// parts says which optional parts the layers of c have.
	parts func(c Config) layerParts
}

// layerParts are the optional parts of a Llama-family decoder layer.
type layerParts struct {
	// qkvBias, outBias and mlpBias put biases on q/k/v, o and
	// gate/up/down.
	qkvBias, outBias, mlpBias bool
	// qkNorm: each head RMS-normalises its queries and keys before RoPE
	// (q_norm and k_norm of size head_dim).
	qkNorm bool
}

// architectures maps config.json's model_type to its architecture. The
// init functions of the arch_*.go files fill it through register, and
// nothing writes it after init (as with image.RegisterFormat's formats
// and database/sql's drivers), so it is read without a lock.
var architectures = map[string]architecture{}

// register adds a to architectures. Only init functions call it. It
// panics on an entry without modelType, class or parts, or on a
// model_type registered twice: a mistake in the file that calls it, which
// any run of the package's tests reveals.
func register(a architecture) {
	if a.modelType == "" || a.class == "" || a.parts == nil {
		panic(fmt.Sprintf("policy: architecture %q registered without model_type, class or parts", a.modelType))
	}
	if _, dup := architectures[a.modelType]; dup {
		panic(fmt.Sprintf("policy: architecture %q registered twice", a.modelType))
	}
	architectures[a.modelType] = a
}

// lookupArch returns modelType's architecture, or an ErrConfig that lists
// the registered model types in order.
func lookupArch(modelType string) (architecture, error) {
	a, ok := architectures[modelType]
	if !ok {
		names := slices.Sorted(maps.Keys(architectures))
		return architecture{}, fmt.Errorf("%w: model_type %q is not one of %s", ErrConfig, modelType, strings.Join(names, ", "))
	}
	return a, nil
}

// arch returns c's architecture; the zero architecture (Llama's layout
// without optional parts) for an unknown model_type, which Validate
// refuses.
func (c Config) arch() architecture { return architectures[c.ModelType] }

// parts returns the optional parts of c's layers.
func (c Config) parts() layerParts {
	if a := c.arch(); a.parts != nil {
		return a.parts(c)
	}
	return layerParts{}
}

// builder declares a model's tensors, each once, with its Hugging Face
// name and shape and in the order of transformers' state_dict, while it
// wires them into the modules that use them. The tensors it makes carry
// their spec only; the model's weights allocate their values.
type builder struct {
	params []*param
}

func (b *builder) tensor(name string, shape ...int) *param {
	p := &param{spec: TensorSpec{Name: name, Shape: shape}}
	b.params = append(b.params, p)
	return p
}

// linear declares path.weight [out, in] and, with bias, path.bias.
func (b *builder) linear(path, name string, in, out int, bias bool) linear {
	l := linear{name: name, path: path, in: in, out: out, w: b.tensor(path+".weight", out, in)}
	if bias {
		l.b = b.tensor(path+".bias", out)
	}
	return l
}

// norm declares path.weight [dim].
func (b *builder) norm(path, name string, dim int, eps float32) rmsNorm {
	return rmsNorm{name: name, dim: dim, eps: eps, w: b.tensor(path+".weight", dim)}
}

// layout builds c's modules and declares their tensors: the Llama layout
// that transformers' LlamaForCausalLM, Qwen2ForCausalLM and
// Qwen3ForCausalLM share — model.embed_tokens; per layer self_attn.{q,k,v,o}_proj
// (with biases where the architecture has them), Qwen3's
// self_attn.{q,k}_norm, mlp.{gate,up,down}_proj, input_layernorm and
// post_attention_layernorm; model.norm; lm_head unless the embeddings
// are tied. Linear weights are [out, in], as torch.nn.Linear stores them.
func layout(c Config) (*transformer, []*param) {
	parts := c.parts()
	h, q, kv, hd := c.HiddenSize, c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim, c.HeadDim
	eps := float32(c.RMSNormEps)
	freqs := c.ropeFreqs()
	b := &builder{}
	t := &transformer{embed: embedding{dim: h, w: b.tensor("model.embed_tokens.weight", c.VocabSize, h)}}
	shape := backend.Attention{Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: hd, Scale: attentionScale(hd)}
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		l := decoderLayer{where: fmt.Sprintf("layer %d", i)}
		a := &l.attn
		a.layer, a.shape = i, shape
		a.q = b.linear(p+"self_attn.q_proj", LoRAQProj, h, q, parts.qkvBias)
		a.k = b.linear(p+"self_attn.k_proj", LoRAKProj, h, kv, parts.qkvBias)
		a.v = b.linear(p+"self_attn.v_proj", LoRAVProj, h, kv, parts.qkvBias)
		a.o = b.linear(p+"self_attn.o_proj", LoRAOProj, q, h, parts.outBias)
		if parts.qkNorm {
			qn, kn := b.norm(p+"self_attn.q_norm", "q_norm", hd, eps), b.norm(p+"self_attn.k_norm", "k_norm", hd, eps)
			a.qNorm, a.kNorm = &qn, &kn
		}
		a.qRope = rope{heads: c.NumAttentionHeads, dim: hd, freqs: freqs}
		a.kRope = rope{heads: c.NumKeyValueHeads, dim: hd, freqs: freqs}
		l.mlp.gate = b.linear(p+"mlp.gate_proj", LoRAGateProj, h, c.IntermediateSize, parts.mlpBias)
		l.mlp.up = b.linear(p+"mlp.up_proj", LoRAUpProj, h, c.IntermediateSize, parts.mlpBias)
		l.mlp.down = b.linear(p+"mlp.down_proj", LoRADownProj, c.IntermediateSize, h, parts.mlpBias)
		l.inputNorm = b.norm(p+"input_layernorm", "input_layernorm", h, eps)
		l.postNorm = b.norm(p+"post_attention_layernorm", "post_attention_layernorm", h, eps)
		t.layers = append(t.layers, l)
	}
	t.norm = b.norm("model.norm", "final norm", h, eps)
	t.head = lmHead{dim: h, vocab: c.VocabSize, w: t.embed.w}
	if !c.TieWordEmbeddings {
		t.head.w = b.tensor("lm_head.weight", c.VocabSize, h)
	}
	return t, b.params
}

// attentionScale is the softmax scale 1/√head_dim.
func attentionScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// ropeFreqs are the rotary inverse frequencies in float32: transformers'
// default table, or the scaled one of RopeInvFreq.
func (c Config) ropeFreqs() []float32 {
	if c.RopeScaling == nil || c.RopeScaling.Type == "default" {
		return backend.RoPEFreqs(c.RopeTheta, c.HeadDim)
	}
	inv := c.RopeInvFreq()
	out := make([]float32, len(inv))
	for i, f := range inv {
		out[i] = float32(f)
	}
	return out
}
