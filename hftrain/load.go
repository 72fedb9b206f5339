package hftrain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
)

// Options configure Load. The zero value loads the model on the device
// that device.Config's zero value chooses (auto: a GPU where the binary
// and the machine have one, the CPU otherwise), with sampler seed 0,
// thinking on, and says nothing.
type Options struct {
	// Device chooses where the model runs and in what precision; a
	// program registers its flags with Device.RegisterFlags.
	Device device.Config
	// Seed seeds the model's sampler (policy.WithSamplerSeed).
	Seed uint64
	// DisableThinking renders the prompts of Qwen3-family templates
	// with enable_thinking false, and opens each assistant turn after
	// tool results with the empty think block the template writes then
	// (NoThinkGenerationPrompt), so that the engine's turns match the
	// template's.
	DisableThinking bool
	// Log, when set, receives one line saying which device was chosen
	// and, when auto fell back to the CPU, why.
	Log io.Writer
	// ModelOptions are more options for policy.Load (WithMaxSessions,
	// WithGenerateOptions, ...); Load adds the device's backend, the
	// tokenizer's decoder and the seed.
	ModelOptions []policy.ModelOption
}

// NoThinkGenerationPrompt opens an assistant turn of Qwen3 with thinking
// disabled: its chat template writes an empty think block after the
// header.
const NoThinkGenerationPrompt = "<|im_start|>assistant\n<think>\n\n</think>\n\n"

// Model is a Hugging Face checkpoint loaded for training: the policy on
// its device and the tokenizer of its folder. Close it when done.
type Model struct {
	// Policy is the transformer; it samples and trains.
	Policy *policy.Model
	// Tokenizer is the folder's tokenizer with its chat template.
	Tokenizer *tokenizer.BPE
	// Device is where Policy runs.
	Device *device.Device
	// Dir is the folder the model was loaded from.
	Dir string

	noThinking bool
}

// Load loads the checkpoint in dir (config.json, *.safetensors,
// tokenizer.json and tokenizer_config.json) onto the device o.Device
// chooses (OpenDevice), with the tokenizer's decoder, so that stop
// strings work. The tokenizer must fit the model's vocabulary.
func Load(ctx context.Context, dir string, o Options) (*Model, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err // it names the file
	}
	mc, err := policy.ReadConfig(dir)
	if err != nil {
		return nil, err // it names the file
	}
	if tv := tok.VocabSize(); tv > mc.VocabSize {
		return nil, fmt.Errorf("hftrain: %s: the tokenizer has %d ids but the model's vocab_size is %d: the tokenizer does not belong to this model", dir, tv, mc.VocabSize)
	}
	dev, err := OpenDevice(ctx, o.Device, mc, o.Log)
	if err != nil {
		return nil, err // it names the device
	}
	opts := append(append([]policy.ModelOption(nil), o.ModelOptions...),
		policy.WithBackend(dev.Backend()), policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(o.Seed))
	pm, err := policy.Load(dir, opts...)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("hftrain: %w", err), dev.Close())
	}
	return &Model{Policy: pm, Tokenizer: tok, Device: dev, Dir: dir, noThinking: o.DisableThinking}, nil
}

// Close closes the policy, then its device.
func (m *Model) Close() error {
	return errors.Join(m.Policy.Close(), m.Device.Close())
}

// ContextLength is the model's context in tokens, prompt and response
// together: config.json's max_position_embeddings.
func (m *Model) ContextLength() int { return m.Policy.Config().MaxPositionEmbeddings }

// Save writes the policy into dir as a Hugging Face checkpoint folder
// (policy.Model.Save: config.json and safetensors weights) with the
// tokenizer files of the folder it was loaded from, ready for vLLM,
// SGLang or another run's Load.
func (m *Model) Save(dir string) error {
	if err := m.Policy.Save(dir, lm.SaveOptions{}); err != nil {
		return fmt.Errorf("hftrain: %w", err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "vocab.json", "merges.txt", "special_tokens_map.json"} {
		if err := copyFile(filepath.Join(m.Dir, name), filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("hftrain: %w", err)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.Write(dst, 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// OpenDevice opens the device dc chooses for a model of configuration mc
// (device.Open) and, when log is not nil, says which on it. Under a
// launcher that runs several ranks on a machine (dist.FromEnviron),
// "cuda" and "auto" mean this rank's own GPU, cuda:LOCAL_RANK (modulo the
// devices CUDA_VISIBLE_DEVICES lists, when it is set); "auto" that cannot
// open it opens the CPU, saying why. Close it after the models on it.
func OpenDevice(ctx context.Context, dc device.Config, mc policy.Config, log io.Writer) (*device.Device, error) {
	env, err := dist.FromEnviron()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = io.Discard
	}
	d, err := openForRank(ctx, dc, mc, env, log)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "device: %s\n", d)
	return d, nil
}

// openForRank is device.Open for this rank of the job (DeviceForRank).
func openForRank(ctx context.Context, dc device.Config, mc policy.Config, env dist.Env, log io.Writer) (*device.Device, error) {
	rc := DeviceForRank(dc, env)
	if rc.Device == dc.Device { // DeviceForRank changes the device only
		return device.Open(ctx, dc, mc)
	}
	d, err := device.Open(ctx, rc, mc)
	if err == nil || dc.Device.Kind != device.Auto {
		return d, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	fmt.Fprintf(log, "device: auto: rank %d's %v: %v\n", env.Rank, rc.Device, err)
	return device.Open(ctx, device.Config{Device: device.Spec{Kind: device.CPU}, Precision: device.FP32}, mc)
}

// DeviceForRank is the device a rank of a job opens: under a launcher
// that runs several ranks on a machine, "cuda" (cuda:0) and "auto" mean
// cuda:LOCAL_RANK, modulo the devices that CUDA_VISIBLE_DEVICES lists
// when it is set (a launcher that gives each rank its own GPU lists
// one). It returns dc unchanged for a local rank 0, an explicit cuda:N
// with N > 0, the CPU, or a process that runs alone.
func DeviceForRank(dc device.Config, env dist.Env) device.Config {
	if !env.Distributed() || env.LocalRank == 0 || dc.Device.Kind == device.CPU || dc.Device.Ordinal != 0 {
		return dc
	}
	ord := env.LocalRank
	if v := strings.TrimSpace(os.Getenv("CUDA_VISIBLE_DEVICES")); v != "" {
		ord %= len(strings.Split(v, ","))
	}
	dc.Device = device.Spec{Kind: device.CUDA, Ordinal: ord}
	return dc
}
