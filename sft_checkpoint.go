package agentrl

import (
	"context"
	"fmt"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dataset"
)

// SFTStateFormat names the layout of an SFT checkpoint's
// CheckpointStateFile.
const SFTStateFormat = "agentrl.sft.v1"

// SFTState is the SFT trainer's position in CheckpointStateFile: with
// the parameters and the optimizer's moments, enough for a resumed run
// to make exactly the updates an uninterrupted one would.
type SFTState struct {
	Format string `json:"format"`
	// Step is the number of completed updates.
	Step int `json:"step"`
	// Seed is SFTConfig.Seed; a checkpoint resumes only its own run.
	Seed uint64 `json:"seed"`
	// Samples is the number of training sequences.
	Samples int `json:"samples"`
	// InOrder is SFTConfig.InOrder: a run drawing its data in order
	// resumes only as one.
	InOrder bool `json:"in_order,omitempty"`
	// Sampler is the batch sampler's position.
	Sampler dataset.SamplerState `json:"sampler"`
	// OptimizerSteps is the optimizer's update count, checked against its
	// state file.
	OptimizerSteps int64 `json:"optimizer_steps"`
	// WorldSize is the number of data-parallel ranks that wrote it, as
	// TrainerState.WorldSize.
	WorldSize int `json:"world_size,omitempty"`
}

// SaveTo writes the SFT trainer's checkpoint into dir, in the layout of
// Trainer.SaveTo (parameters, optimizer state, a LoRA policy's PEFT
// folder) with an SFTState.
func (s *SFTTrainer) SaveTo(dir string) error {
	return saveTraining(dir, s.opt, s.model, SFTState{
		Format: SFTStateFormat, Step: s.stepsDone, Seed: s.cfg.Seed, Samples: len(s.data), InOrder: s.cfg.InOrder,
		Sampler: s.sampler.State(), OptimizerSteps: s.opt.Steps(), WorldSize: recordedSize(s.job),
	}, shardOnly(s.job, s.opt))
}

// SaveCheckpoint writes the checkpoint of the completed updates as
// root/step-N, points root/latest at it and keeps the newest keep (keep
// < 1 keeps all), as Trainer.SaveCheckpoint does.
func (s *SFTTrainer) SaveCheckpoint(ctx context.Context, root checkpoint.Root, keep int) (string, error) {
	return s.job.saveCheckpoint(ctx, root, s.stepsDone, keep, s.SaveTo)
}

// LoadFrom restores a checkpoint written by SaveTo. It must come from a
// run with the same Seed, the same number of samples and the same
// parameters; otherwise the error wraps ErrCheckpoint. The weights of a
// checkpoint with float32 master weights are read as Trainer.LoadFrom
// reads them (the master, unless the trainer keeps bf16 weights). On
// error the trainer may hold a partial state and must not be used.
func (s *SFTTrainer) LoadFrom(dir string) error {
	var st SFTState
	if err := readTrainingState(dir, &st); err != nil {
		return err
	}
	switch {
	case st.Format != SFTStateFormat:
		return fmt.Errorf("%w: %s: format %q, want %q", ErrCheckpoint, CheckpointStateFile, st.Format, SFTStateFormat)
	case st.Step < 0:
		return fmt.Errorf("%w: %s: step %d", ErrCheckpoint, CheckpointStateFile, st.Step)
	case st.Seed != s.cfg.Seed:
		return fmt.Errorf("%w: %s: seed %d, but SFTConfig.Seed is %d", ErrCheckpoint, CheckpointStateFile, st.Seed, s.cfg.Seed)
	case st.Samples != len(s.data):
		return fmt.Errorf("%w: %s: %d samples, but the trainer has %d", ErrCheckpoint, CheckpointStateFile, st.Samples, len(s.data))
	case st.InOrder != s.cfg.InOrder:
		return fmt.Errorf("%w: %s: in_order %t, but SFTConfig.InOrder is %t", ErrCheckpoint, CheckpointStateFile, st.InOrder, s.cfg.InOrder)
	}
	if err := checkWorldSize(st.WorldSize, s.job.size(), s.allowResize); err != nil {
		return err
	}
	if err := loadTraining(dir, s.opt, s.model, st.OptimizerSteps); err != nil {
		return err
	}
	if err := s.sampler.Restore(st.Sampler); err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	s.stepsDone = st.Step
	return nil
}

// Resume loads the newest checkpoint under root. It returns false, and
// changes nothing, when root holds none.
func (s *SFTTrainer) Resume(root checkpoint.Root) (bool, error) { return resume(root, s.LoadFrom) }
