package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// GenerationConfigFileName is Hugging Face's generation_config.json, whose
// eos_token_id Load adds to the model's end-of-sequence tokens.
const GenerationConfigFileName = "generation_config.json"

// Load reads a Hugging Face checkpoint folder: config.json, and the
// weights in model.safetensors or in the shards that
// model.safetensors.index.json lists, F32, F16 or BF16 converted to
// float32. Every tensor must match the config's TensorSpecs by name and
// shape (a missing, unexpected or misshapen tensor is an error that names
// it; a tied checkpoint may carry a redundant lm_head.weight, which is
// ignored). eos_token_id of generation_config.json, when the file exists,
// is added to the config's end-of-sequence tokens. Tokenizer files are
// policy/tokenizer's business; a model that samples for a rollout engine
// or a server needs the tokenizer's decoder, WithDecoder(tok.Decode), or
// requests with stop strings fail (package hftrain loads the model and
// its tokenizer together, with the decoder).
func Load(dir string, opts ...ModelOption) (*Model, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	if err := cfg.CheckTensors(ck.Shapes()); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	m, err := newModel(cfg, buildOptions(opts))
	if err != nil {
		return nil, err
	}
	for _, p := range m.w.base {
		info, _ := ck.Info(p.spec.Name)
		if !info.DType.IsFloat32Convertible() {
			m.w.free()
			return nil, fmt.Errorf("%s: tensor %s has dtype %s; want F32, F16 or BF16", dir, p.spec.Name, info.DType)
		}
		if err := ck.ReadFloat32(p.spec.Name, p.data); err != nil {
			m.w.free()
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	eos, err := readGenerationEOS(dir)
	if err != nil {
		m.w.free()
		return nil, err
	}
	for _, id := range eos {
		if !containsInt(m.eos, id) {
			m.eos = append(m.eos, id)
		}
	}
	return m, nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// readGenerationEOS returns generation_config.json's eos_token_id (an int
// or a list); none when the file is absent.
func readGenerationEOS(dir string) ([]int, error) {
	path := filepath.Join(dir, GenerationConfigFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrConfig, err)
	}
	p := fieldParser{raw: raw}
	ids := p.intOrList("eos_token_id")
	if p.err != nil {
		return nil, fmt.Errorf("%s: %w", path, p.err)
	}
	return ids, nil
}

// Save writes the model as a Hugging Face checkpoint folder that
// transformers' from_pretrained and vLLM load: config.json (torch_dtype
// set to the written dtype) and model.safetensors (or shards and
// model.safetensors.index.json) with Hugging Face tensor names; tied
// embeddings are written once, as transformers does. A model with a LoRA
// adapter is written merged (W + scale·B·A), the function it computes; its
// adapter alone is SaveAdapter's. WriteModel writes the same folder from
// weights held elsewhere.
func (m *Model) Save(dir string, opts lm.SaveOptions) error {
	if _, err := saveDType(m.cfg, opts); err != nil {
		return err
	}
	m.mu.Lock()
	if err := m.w.pull(false); err != nil {
		m.mu.Unlock()
		return err
	}
	weights := make(map[string][]float32, len(m.w.base))
	for _, p := range m.w.base {
		weights[p.spec.Name] = slices.Clone(p.data)
	}
	if m.lora != nil && !m.lora.merged {
		// What the model computes: each adapted weight with its delta.
		m.forEachAdapter(func(lin *linear) {
			addLoRADelta(weights[lin.w.spec.Name], lin.lora.a.data, lin.lora.b.data, lin.lora, float64(lin.lora.scale))
		})
	}
	m.mu.Unlock()
	return WriteModel(dir, m.cfg, func(name string, dst []float32) error {
		copy(dst, weights[name])
		return nil
	}, opts)
}

// WriteModel writes the Hugging Face checkpoint folder of a model of
// configuration cfg whose weights are read elsewhere, exactly as
// Model.Save writes it: read fills dst with the tensor name, once for
// each of cfg.TensorSpecs, in the order of the data in the files (by
// name); dst has the tensor's size, row-major.
// The folder's files are config.json (torch_dtype set to the written
// dtype) and model.safetensors or its shards, each written atomically.
//
// The weights are streamed (safetensors.WriteCheckpoint with Fill): read
// is called for one tensor at a time, into one buffer reused from tensor
// to tensor, so that writing a model holds its largest tensor in float32
// (plus about a MiB), not the model. An error of read stops the write,
// wrapped and naming the tensor, and leaves dir as it was: no weights
// file is replaced, and a folder that WriteModel made is removed.
func WriteModel(dir string, cfg Config, read func(name string, dst []float32) error, opts lm.SaveOptions) error {
	cfg, err := saveDType(cfg, opts)
	if err != nil {
		return err
	}
	dt := opts.DType
	if dt == "" {
		dt = safetensors.F32
	}
	specs := cfg.TensorSpecs()
	tensors := make([]safetensors.Tensor, len(specs))
	for i, sp := range specs {
		tensors[i] = safetensors.Tensor{Name: sp.Name, DType: dt, Shape: sp.Shape, Fill: func(dst []float32) error { return read(sp.Name, dst) }}
	}
	undo, err := mkdirs(dir)
	if err != nil {
		return err
	}
	if err := safetensors.WriteCheckpoint(dir, tensors, nil, opts.MaxShardBytes); err != nil {
		undo()
		return fmt.Errorf("policy: weights: %w", err)
	}
	return WriteConfig(dir, cfg)
}

// mkdirs makes dir and its missing parents, like os.MkdirAll, and
// returns a func that removes the folders it made, those still empty.
func mkdirs(dir string) (undo func(), err error) {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return func() {
		for _, d := range made {
			if os.Remove(d) != nil {
				return
			}
		}
	}, nil
}

// saveDType is cfg with torch_dtype set to what opts writes (F32 by
// default, or BF16).
func saveDType(cfg Config, opts lm.SaveOptions) (Config, error) {
	switch opts.DType {
	case "", safetensors.F32:
		cfg.TorchDType = "float32"
	case safetensors.BF16:
		cfg.TorchDType = "bfloat16"
	default:
		return cfg, fmt.Errorf("%w: save dtype %q; want F32 or BF16", ErrInput, opts.DType)
	}
	return cfg, nil
}
