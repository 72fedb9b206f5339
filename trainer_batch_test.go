package agentrl

import (
	"testing"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/tensor"
)

// Two trajectories, written out by hand:
//
//	traj 0: prompt [10 11], response [20 21 | 90 91 | 22]  (a turn, a tool
//	        result of 2 tokens with mask 0, a second turn)
//	traj 1: prompt [10 11 12], response [30]
//
// The response spans are left-aligned in a [2, 5] batch; traj 1 is padded
// with 4 zero columns of mask 0.
func handTrajectories() []*sample {
	return []*sample{
		{
			traj: rollout.Trajectory{
				Tokens:    []int{10, 11, 20, 21, 90, 91, 22},
				PromptLen: 2,
				Mask:      []float32{0, 0, 1, 1, 0, 0, 1},
				LogProbs:  []float32{0, 0, -0.1, -0.2, 0, 0, -0.3},
			},
			adv: []float32{0.5, 0.5, 0, 0, 0.5},
			old: []float32{-0.11, -0.21, 0, 0, -0.31},
			ref: []float32{-1, -2, 0, 0, -3},
		},
		{
			traj: rollout.Trajectory{
				Tokens:    []int{10, 11, 12, 30},
				PromptLen: 3,
				Mask:      []float32{0, 0, 0, 1},
				LogProbs:  []float32{0, 0, 0, -0.4},
			},
			adv: []float32{-0.5},
			old: []float32{-0.41},
			ref: []float32{-4},
		},
	}
}

func TestLossBatchLayout(t *testing.T) {
	part := handTrajectories()
	stats := lm.TokenStats{
		// Aligned with the whole sequences; position 0 is 0 by contract.
		LogProbs: [][]float32{{0, -9, -1.1, -1.2, -5, -6, -1.3}, {0, -8, -7, -1.4}},
		Entropy:  [][]float32{{0, 9, 0.1, 0.2, 5, 6, 0.3}, {0, 8, 7, 0.4}},
	}
	tr := &Trainer{cfg: TrainerConfig{Loss: loss.Config{KLCoef: 0.1, TISCap: 2}}}
	b, err := tr.lossBatch(part, stats)
	require.NoError(t, err)
	want := map[string]struct {
		got  *tensor.Dense
		data []float32
	}{
		"LogProbs":        {b.LogProbs, []float32{-1.1, -1.2, -5, -6, -1.3, -1.4, 0, 0, 0, 0}},
		"Entropy":         {b.Entropy, []float32{0.1, 0.2, 5, 6, 0.3, 0.4, 0, 0, 0, 0}},
		"OldLogProbs":     {b.OldLogProbs, []float32{-0.11, -0.21, 0, 0, -0.31, -0.41, 0, 0, 0, 0}},
		"Advantages":      {b.Advantages, []float32{0.5, 0.5, 0, 0, 0.5, -0.5, 0, 0, 0, 0}},
		"Mask":            {b.Mask, []float32{1, 1, 0, 0, 1, 1, 0, 0, 0, 0}},
		"RefLogProbs":     {b.RefLogProbs, []float32{-1, -2, 0, 0, -3, -4, 0, 0, 0, 0}},
		"RolloutLogProbs": {b.RolloutLogProbs, []float32{-0.1, -0.2, 0, 0, -0.3, -0.4, 0, 0, 0, 0}},
	}
	for name, w := range want {
		require.NotNil(t, w.got, name)
		assert.Equal(t, []int{2, 5}, []int(w.got.Shape()), name)
		assert.Equal(t, w.data, w.got.Data().([]float32), name)
	}

	// Without KL and TIS those tensors are left out.
	b, err = (&Trainer{}).lossBatch(part, stats)
	require.NoError(t, err)
	assert.Nil(t, b.RefLogProbs)
	assert.Nil(t, b.RolloutLogProbs)
}

func TestChunks(t *testing.T) {
	assert.Equal(t, [][2]int{{0, 3}, {3, 6}, {6, 7}}, chunks(7, 3))
	assert.Nil(t, chunks(0, 3))
}

func TestRequestSeedDiffers(t *testing.T) {
	seen := map[uint64]bool{}
	for step := range 3 {
		for gen := range 3 {
			for pos := range 3 {
				s := requestSeed(1, step, gen, pos)
				assert.False(t, seen[s], "seed of step %d gen %d pos %d repeats", step, gen, pos)
				seen[s] = true
			}
		}
	}
	assert.Equal(t, requestSeed(1, 2, 0, 1), requestSeed(1, 2, 0, 1))
}

// benchSamples makes 8 trajectories of a 256-token prompt and a
// 2048-token response with a 128-token tool result in the middle.
func benchSamples() ([]*sample, lm.TokenStats) {
	const prompt, resp = 256, 2048
	part := make([]*sample, 8)
	st := lm.TokenStats{LogProbs: make([][]float32, 8), Entropy: make([][]float32, 8)}
	for i := range part {
		n := prompt + resp
		s := &sample{traj: rollout.Trajectory{Tokens: make([]int, n), PromptLen: prompt, Mask: make([]float32, n), LogProbs: make([]float32, n)}}
		for t := prompt; t < n; t++ {
			if t < prompt+900 || t >= prompt+1028 {
				s.traj.Mask[t] = 1
			}
			s.traj.LogProbs[t] = -0.5
		}
		s.adv, s.old, s.ref = make([]float32, resp), make([]float32, resp), make([]float32, resp)
		for t := range resp {
			s.adv[t], s.old[t] = s.traj.Mask[prompt+t]*0.3, -0.5
		}
		part[i] = s
		st.LogProbs[i], st.Entropy[i] = make([]float32, n), make([]float32, n)
		for t := 1; t < n; t++ {
			st.LogProbs[i][t], st.Entropy[i][t] = -0.45, 1.2
		}
	}
	return part, st
}

// BenchmarkLossBatch measures the trainer's own work per micro-batch:
// laying trajectories out as loss.Batch tensors and scattering the
// gradient back (B = 8, T = 2048).
func BenchmarkLossBatch(b *testing.B) {
	part, st := benchSamples()
	tr := &Trainer{cfg: GRPOTCR()}
	starts, lens := make([]int, len(part)), make([]int, len(part))
	for i, s := range part {
		starts[i], lens[i] = s.traj.PromptLen, len(s.traj.Tokens)
	}
	for b.Loop() {
		lb, err := tr.lossBatch(part, st)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := loss.UnpadRows(lb.LogProbs, starts, lens, 0.5); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLossCompute is the loss computation on the same batch, for
// scale: the conversion should be a small fraction of it.
func BenchmarkLossCompute(b *testing.B) {
	part, st := benchSamples()
	tr := &Trainer{cfg: GRPOTCR(), computer: loss.NewComputer(nil)}
	lb, err := tr.lossBatch(part, st)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := tr.computer.Compute(tr.cfg.Loss, lb); err != nil {
			b.Fatal(err)
		}
	}
}
