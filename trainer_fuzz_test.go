package agentrl_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrl/agentrl"
	"github.com/stretchr/testify/require"
)

// FuzzTrainerState feeds arbitrary bytes as a checkpoint's
// trainer_state.json (or, with the first byte odd, as its
// params.safetensors): LoadFrom must return an error or a usable trainer,
// never panic.
func FuzzTrainerState(f *testing.F) {
	f.Add([]byte(`{"format":"agentrl.trainer.v1","step":1,"seed":7,"prompts":4,"sampler":{"seed":7,"epoch":0,"offset":2},"optimizer_steps":1}`))
	f.Add([]byte(`{"format":"agentrl.trainer.v1","step":-1}`))
	f.Add([]byte(`{"format":"agentrl.trainer.v1","step":1,"seed":7,"prompts":4,"sampler":{"seed":7,"epoch":-3,"offset":99},"optimizer_steps":1}`))
	f.Add([]byte("\x01\x00\x00\x00\x00\x00\x00\x00{"))
	f.Add([]byte{})
	ctx := context.Background()
	base := f.TempDir()
	src, _ := newBandit(f, banditConfig(), banditReward)
	_, err := src.Step(ctx)
	require.NoError(f, err)
	require.NoError(f, src.SaveTo(base))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		for _, name := range []string{agentrl.CheckpointStateFile, agentrl.CheckpointParamsFile, "optimizer.safetensors"} {
			b, err := os.ReadFile(filepath.Join(base, name))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		}
		target := agentrl.CheckpointStateFile
		if len(data) > 0 && data[0]%2 == 1 {
			target = agentrl.CheckpointParamsFile
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, target), data, 0o644))
		tr, _ := newBandit(t, banditConfig(), banditReward)
		if err := tr.LoadFrom(dir); err != nil {
			return
		}
		// A checkpoint that loads must give a trainer that steps.
		_, err := tr.Step(ctx)
		require.NoError(t, err)
	})
}
