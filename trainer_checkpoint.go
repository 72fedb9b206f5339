package agentrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// Files of a trainer checkpoint folder.
const (
	// CheckpointParamsFile holds the policy's parameters, one F32 tensor
	// per lm.Param under its name, stored exactly: with
	// DataParallel.ZeROBF16Weights the bf16 weights, widened, whose
	// float32 master the optimizer state holds (and a resume reads).
	CheckpointParamsFile = "params.safetensors"
	// CheckpointStateFile holds the trainer's position (TrainerState) as
	// JSON. The optimizer's state is policy.StateFileName.
	CheckpointStateFile = "trainer_state.json"
	// CheckpointAdapterDir holds, for a policy training a LoRA adapter,
	// the adapter as a PEFT folder (adapter_config.json,
	// adapter_model.safetensors) that PEFT, vLLM and SGLang load, as
	// verl's checkpoints carry lora_adapter/.
	CheckpointAdapterDir = "lora_adapter"
	// TrainerStateFormat names the layout of CheckpointStateFile.
	TrainerStateFormat = "agentrl.trainer.v1"
)

// ErrCheckpoint is wrapped by errors of loading a checkpoint that does not
// fit the trainer: another format, a missing or misshapen parameter,
// another data set size or seed.
var ErrCheckpoint = errors.New("agentrl: checkpoint does not fit")

// TrainerState is the trainer's position in CheckpointStateFile: enough,
// with the parameters and the optimizer's moments, for a resumed run to
// take exactly the steps an uninterrupted one would. The rollout and
// shuffle randomness is derived from Seed and Step, so no generator state
// is needed beyond them.
type TrainerState struct {
	Format string `json:"format"`
	// Step is the number of completed steps.
	Step int `json:"step"`
	// Seed is TrainerConfig.Seed; a checkpoint resumes only its own run.
	Seed uint64 `json:"seed"`
	// Prompts is the size of the training set.
	Prompts int `json:"prompts"`
	// Sampler is the prompt sampler's position.
	Sampler dataset.SamplerState `json:"sampler"`
	// OptimizerSteps is the optimizer's update count, checked against its
	// state file.
	OptimizerSteps int64 `json:"optimizer_steps"`
	// WorldSize is the number of data-parallel ranks of the job that
	// wrote the checkpoint; omitted (0) for one process. A trainer with
	// another number refuses it unless DataParallel.AllowWorldSizeChange
	// is set.
	WorldSize int `json:"world_size,omitempty"`
}

// SaveTo writes the trainer's checkpoint into dir (created when missing):
// CheckpointParamsFile, the optimizer's state (policy.StateFileName) and
// CheckpointStateFile, each written atomically; a policy training a LoRA
// adapter also gets its PEFT folder in CheckpointAdapterDir (the params
// file holds the same adapter, which LoadFrom reads). For a crash-safe series of
// checkpoints use SaveCheckpoint.
func (t *Trainer) SaveTo(dir string) error {
	return saveTraining(dir, t.opt, t.parts.Policy, TrainerState{
		Format: TrainerStateFormat, Step: t.stepsDone, Seed: t.cfg.Seed, Prompts: len(t.parts.Prompts),
		Sampler: t.samplerState, OptimizerSteps: t.opt.Steps(), WorldSize: recordedSize(t.job),
	}, shardOnly(t.job, t.opt))
}

// saveTraining writes what both trainers' checkpoints hold into dir
// (created when missing): the parameters, the optimizer's state, a LoRA
// policy's PEFT folder, and state as JSON in CheckpointStateFile, each
// written atomically. With shardOnly (a rank other than 0 of a job
// with a sharded optimizer) it writes the optimizer's shard only.
func saveTraining(dir string, opt policy.Optimizer, pol lm.Trainable, state any, shardOnly bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	if shardOnly {
		if err := opt.SaveStateFile(dir); err != nil {
			return fmt.Errorf("agentrl: checkpoint: %w", err)
		}
		return nil
	}
	params, err := opt.Params()
	if err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	if err := saveParams(filepath.Join(dir, CheckpointParamsFile), params); err != nil {
		return err
	}
	if err := opt.SaveStateFile(dir); err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	if err := saveAdapter(pol, filepath.Join(dir, CheckpointAdapterDir)); err != nil {
		return err
	}
	b, err := json.MarshalIndent(state, "", "  ")
	if err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, CheckpointStateFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	return nil
}

// readTrainingState reads dir's CheckpointStateFile into st.
func readTrainingState(dir string, st any) error {
	b, err := os.ReadFile(filepath.Join(dir, CheckpointStateFile))
	if err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCheckpoint, CheckpointStateFile, err)
	}
	return nil
}

// loadTraining restores the parameters and the optimizer's state of dir
// into opt, the optimizer of pol, and checks the optimizer's step count
// against the trainer state's.
//
// The parameters are the params file's, except when the optimizer
// state holds float32 master weights (a job with
// DataParallel.ZeROBF16Weights wrote it, and its params file holds
// their bf16 rounding) and opt keeps no master of its own: then they
// are the master (openMaster), so that the run resumes from the trained
// weights, not from their rounding. An optimizer with bf16 weights
// loads its shard of the master from the state (LoadStateFile).
func loadTraining(dir string, opt policy.Optimizer, pol lm.Trainable, optimizerSteps int64) error {
	master, err := openMaster(dir, opt, pol)
	if err != nil {
		return err
	}
	if master != nil {
		defer master.Close()
	}
	if err := opt.LoadParams(func(params []lm.Param) error {
		return loadParams(filepath.Join(dir, CheckpointParamsFile), params, master)
	}); err != nil {
		return err
	}
	if err := opt.LoadStateFile(dir); err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if opt.Steps() != optimizerSteps {
		return fmt.Errorf("%w: optimizer state has %d steps, %s says %d", ErrCheckpoint, opt.Steps(), CheckpointStateFile, optimizerSteps)
	}
	return nil
}

// openMaster opens the float32 master weights that the optimizer state
// in dir holds (policy.StateInfo.Master), which are the weights to
// resume from for an optimizer that keeps no master of its own; nil
// when the state holds none, or when opt keeps its own
// (policy.ShardedAdamW.BF16Weights), whose LoadStateFile reads its
// shard of them. A policy training a LoRA adapter is refused master
// weights: no trainer writes them for one (policy.ShardOptions.BF16Weights
// refuses LoRA), so the checkpoint is not its run's.
func openMaster(dir string, opt policy.Optimizer, pol lm.Trainable) (*policy.MasterWeights, error) {
	if own, ok := opt.(interface{ BF16Weights() bool }); ok && own.BF16Weights() {
		return nil, nil
	}
	info, err := policy.ReadStateInfo(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	if !info.Master {
		return nil, nil
	}
	if lp, ok := pol.(LoRAPolicy); ok {
		if _, has := lp.LoRA(); has {
			return nil, fmt.Errorf("%w: the optimizer state holds float32 master weights (%s says \"master\"), which a run training a LoRA adapter does not have: bf16 weights are not trained with a LoRA adapter",
				ErrCheckpoint, policy.ShardStateIndex)
		}
	}
	w, err := policy.OpenMasterWeights(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	return w, nil
}

// SaveCheckpoint writes the checkpoint of the completed steps as
// root/step-N and points root/latest at it (checkpoint.Root.Save), then
// keeps the newest keep checkpoints (keep < 1 keeps all). In a
// data-parallel job rank 0 writes it and the other ranks wait for it
// and return its folder; every rank must call it.
func (t *Trainer) SaveCheckpoint(ctx context.Context, root checkpoint.Root, keep int) (string, error) {
	return t.job.saveCheckpoint(ctx, root, t.stepsDone, keep, t.SaveTo)
}

// saveCheckpoint writes step's checkpoint with saveTo through
// root.Save, then keeps the newest keep (keep < 1 keeps all).
func saveCheckpoint(ctx context.Context, root checkpoint.Root, step, keep int, saveTo func(dir string) error) (string, error) {
	dir, err := root.Save(ctx, step, func(_ context.Context, dir string) error { return saveTo(dir) })
	if err != nil {
		return "", err
	}
	if keep > 0 {
		if err := root.Prune(keep); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// LoadFrom restores a checkpoint written by SaveTo: the parameters (into
// the policy's Params, in place), the optimizer's state, the step and the
// prompt sampler's position. The checkpoint must come from a run with the
// same Seed, the same number of prompts, the same parameter names and
// sizes and the same number of data-parallel ranks (unless
// DataParallel.AllowWorldSizeChange); otherwise LoadFrom returns an
// error wrapping ErrCheckpoint. Every rank of a data-parallel job loads
// the same checkpoint. On
// error the trainer may hold a partial state and must not be used.
//
// A checkpoint of a job with DataParallel.ZeROBF16Weights holds the
// bf16 rounding of the weights in CheckpointParamsFile and their
// float32 master in the optimizer state: a trainer with bf16 weights
// loads its shard of the master with the moments; any other (one
// process, or a job without ZeROBF16Weights) takes the master as its
// weights, so that it resumes from the trained weights, not from their
// rounding. A policy training a LoRA adapter refuses such a checkpoint
// (bf16 weights are not trained with an adapter).
func (t *Trainer) LoadFrom(dir string) error {
	t.stopProducer() // its batches belong to the run being replaced
	var st TrainerState
	if err := readTrainingState(dir, &st); err != nil {
		return err
	}
	switch {
	case st.Format != TrainerStateFormat:
		return fmt.Errorf("%w: %s: format %q, want %q", ErrCheckpoint, CheckpointStateFile, st.Format, TrainerStateFormat)
	case st.Step < 0:
		return fmt.Errorf("%w: %s: step %d", ErrCheckpoint, CheckpointStateFile, st.Step)
	case st.Seed != t.cfg.Seed:
		return fmt.Errorf("%w: %s: seed %d, but TrainerConfig.Seed is %d", ErrCheckpoint, CheckpointStateFile, st.Seed, t.cfg.Seed)
	case st.Prompts != len(t.parts.Prompts):
		return fmt.Errorf("%w: %s: %d prompts, but the trainer has %d", ErrCheckpoint, CheckpointStateFile, st.Prompts, len(t.parts.Prompts))
	}
	if err := checkWorldSize(st.WorldSize, t.job.size(), t.parts.DataParallel.AllowWorldSizeChange); err != nil {
		return err
	}
	if err := loadTraining(dir, t.opt, t.parts.Policy, st.OptimizerSteps); err != nil {
		return err
	}
	if err := t.sampler.Restore(st.Sampler); err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	t.stepsDone = st.Step
	t.samplerState = st.Sampler
	t.published = -1 // the samplers get the restored weights before the next rollout
	t.trainIntervals, t.lastEnd = nil, time.Time{}
	return nil
}

// Resume loads the newest checkpoint under root. It returns false, and
// changes nothing, when root holds none (checkpoint.ErrNotFound).
func (t *Trainer) Resume(root checkpoint.Root) (bool, error) { return resume(root, t.LoadFrom) }

// resume loads root's newest checkpoint with load; false, and nothing
// loaded, when root holds none.
func resume(root checkpoint.Root, load func(dir string) error) (bool, error) {
	_, dir, err := root.Latest()
	if errors.Is(err, checkpoint.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := load(dir); err != nil {
		return false, err
	}
	return true, nil
}

// saveParams writes params as F32 tensors of shape [len] to path,
// atomically.
func saveParams(path string, params []lm.Param) error {
	tensors := make([]safetensors.Tensor, len(params))
	for i, p := range params {
		tensors[i] = safetensors.Tensor{Name: p.Name, DType: safetensors.F32, Shape: []int{len(p.Data)}, Float32: p.Data}
	}
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		return safetensors.Write(w, tensors, map[string]string{"format": TrainerStateFormat})
	})
	if err != nil {
		return fmt.Errorf("agentrl: checkpoint: %w", err)
	}
	return nil
}

// loadParams reads every parameter of params from path into its Data,
// or from master when it is not nil (the float32 master weights, of
// which path holds the bf16 rounding). Every parameter must be present
// in path with its size, and in master; path may not hold others.
func loadParams(path string, params []lm.Param, master *policy.MasterWeights) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	defer f.Close()
	if n := len(f.Tensors()); n != len(params) {
		return fmt.Errorf("%w: %s holds %d tensors, the policy has %d parameters", ErrCheckpoint, CheckpointParamsFile, n, len(params))
	}
	for _, p := range params {
		info, ok := f.Info(p.Name)
		if !ok {
			return fmt.Errorf("%w: %s lacks parameter %q", ErrCheckpoint, CheckpointParamsFile, p.Name)
		}
		if info.DType != safetensors.F32 || len(info.Shape) != 1 || info.Shape[0] != len(p.Data) {
			return fmt.Errorf("%w: %s: parameter %q is %s%v, want F32[%d]", ErrCheckpoint, CheckpointParamsFile, p.Name, info.DType, info.Shape, len(p.Data))
		}
		read := f.ReadFloat32
		if master != nil {
			read = master.ReadFloat32
		}
		if err := read(p.Name, p.Data); err != nil {
			return fmt.Errorf("%w: %w", ErrCheckpoint, err)
		}
	}
	return nil
}
