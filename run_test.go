package agentrl_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/rollout"
)

// runLog returns the rows of a metrics log as step → metrics.
func runLog(t *testing.T, buf *bytes.Buffer) []metrics.Row {
	t.Helper()
	rows, err := metrics.Read(buf)
	require.NoError(t, err)
	return rows
}

func rowSteps(rows []metrics.Row) []int {
	var out []int
	for _, r := range rows {
		out = append(out, r.Step)
	}
	return out
}

// recorder is an agentrl.Recorder that keeps what it is told.
type recorder struct {
	inits   [][2]int
	records []agentrl.StepRecord
}

func (r *recorder) Init(start, total int) error {
	r.inits = append(r.inits, [2]int{start, total})
	return nil
}

func (r *recorder) Record(s agentrl.StepRecord) error {
	s.Row = maps.Clone(s.Row)
	r.records = append(r.records, s)
	return nil
}

// TestRunSchedule: over 5 steps with validation every 2 (and before
// training) and a checkpoint every 2 keeping 2, Run logs rows 0 (the
// validation alone) and 1–5, puts the validation's metrics in the rows of
// steps 2, 4 and 5 (5: the last step), checkpoints after steps 2, 4 and 5
// and keeps step-4 and step-5, and runs the hooks in that order. Its
// Recorder starts a run from 0 to 5 and gets each step's logged row.
func TestRunSchedule(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tr, _ := newBanditParts(t, banditConfig(), agentrl.TrainerParts{Reward: banditReward, Metrics: metrics.NewLogger(&buf)}, 8)
	root := checkpoint.Root{Dir: filepath.Join(t.TempDir(), "ckpt")}
	var validated, checkpoints, hooked []int
	rec := &recorder{}
	err := tr.Run(ctx, agentrl.RunConfig{
		Steps: 5, Recorder: rec,
		Validate: func(_ context.Context, step int) (map[string]float64, error) {
			validated = append(validated, step)
			return map[string]float64{"val-core/x": float64(step)}, nil
		},
		ValEvery: 2, ValBeforeTrain: true,
		Checkpoints: root, SaveEvery: 2, Keep: 2,
		OnStep: func(_ context.Context, step int, row map[string]float64) error {
			hooked = append(hooked, step)
			row["user/extra"] = 1
			return nil
		},
		OnCheckpoint: func(step int, dir string) error {
			checkpoints = append(checkpoints, step)
			assert.Equal(t, filepath.Join(root.Dir, "step-"+string(rune('0'+step))), dir)
			return nil
		},
	})
	require.NoError(t, err)
	assert.Equal(t, 5, tr.StepsDone())
	assert.Equal(t, []int{0, 2, 4, 5}, validated)
	assert.Equal(t, []int{1, 2, 3, 4, 5}, hooked)
	assert.Equal(t, []int{2, 4, 5}, checkpoints)

	rows := runLog(t, &buf)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5}, rowSteps(rows), "one row per step, validation included")
	assert.Equal(t, map[string]float64{"val-core/x": 0}, rows[0].Values)
	for _, r := range rows[1:] {
		v, ok := r.Values["val-core/x"]
		assert.Equal(t, r.Step == 2 || r.Step == 4 || r.Step == 5, ok, "step %d", r.Step)
		if ok {
			assert.Equal(t, float64(r.Step), v)
		}
		assert.Equal(t, 1.0, r.Values["user/extra"], "the hook's addition is logged")
		assert.Contains(t, r.Values, "actor/pg_loss")
	}
	entries, err := os.ReadDir(root.Dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Subset(t, names, []string{"step-4", "step-5"})
	assert.NotContains(t, names, "step-2", "pruned to the newest two")

	assert.Equal(t, [][2]int{{0, 5}}, rec.inits)
	require.Len(t, rec.records, 5)
	for i, r := range rec.records {
		assert.Equal(t, i+1, r.Step)
		assert.Equal(t, rows[i+1].Values, r.Row, "step %d: the row as logged", r.Step)
		require.Len(t, r.Figures, 2)
		assert.Equal(t, agentrl.Figure{Name: "reward", Value: r.Row["critic/score/mean"]}, r.Figures[0])
		assert.Equal(t, agentrl.Figure{Name: "acc", Value: r.Row["critic/acc/mean"]}, r.Figures[1])
		assert.Positive(t, r.Tokens)
	}
}

// TestRunResumeEquivalence: a run of 4 steps, stopped after 2 and resumed
// by a second Run from its checkpoint, ends with bit for bit the weights
// of an uninterrupted run (the rollout and shuffle randomness is derived
// from the seed and the step), and does not validate before training
// again.
func TestRunResumeEquivalence(t *testing.T) {
	ctx := context.Background()
	full, mf := newBandit(t, banditConfig(), banditReward)
	require.NoError(t, full.Run(ctx, agentrl.RunConfig{Steps: 4}))

	root := checkpoint.Root{Dir: filepath.Join(t.TempDir(), "ckpt")}
	first, _ := newBandit(t, banditConfig(), banditReward)
	require.NoError(t, first.Run(ctx, agentrl.RunConfig{Steps: 2, Checkpoints: root}))

	second, ms := newBandit(t, banditConfig(), banditReward)
	resumedAt := -1
	var validated []int
	require.NoError(t, second.Run(ctx, agentrl.RunConfig{
		Steps: 4, Checkpoints: root, Resume: true,
		OnResume: func(step int) error { resumedAt = step; return nil },
		Validate: func(_ context.Context, step int) (map[string]float64, error) {
			validated = append(validated, step)
			return nil, nil
		},
		ValBeforeTrain: true,
	}))
	assert.Equal(t, 2, resumedAt)
	assert.Equal(t, []int{4}, validated, "no validation before a resumed run, one after its last step")
	assert.Equal(t, mf.w, ms.w, "parameters bit for bit")

	// Already there: nothing to do.
	again, _ := newBandit(t, banditConfig(), banditReward)
	require.NoError(t, again.Run(ctx, agentrl.RunConfig{Steps: 4, Checkpoints: root, Resume: true}))
	assert.Equal(t, 4, again.StepsDone())
}

// TestRunStops: a cancelled context stops Run between steps with its
// error; a hook's error stops it with that error; a validation error
// names the step; a bad RunConfig names the field.
func TestRunStops(t *testing.T) {
	stop := errors.New("stop here")
	for _, tc := range []struct {
		name string
		rc   func(cancel context.CancelFunc) agentrl.RunConfig
		want error
		msg  string
		done int
	}{
		{"context", func(cancel context.CancelFunc) agentrl.RunConfig {
			return agentrl.RunConfig{Steps: 5, OnStep: func(_ context.Context, step int, _ map[string]float64) error {
				if step == 2 {
					cancel()
				}
				return nil
			}}
		}, context.Canceled, "", 2},
		{"hook", func(context.CancelFunc) agentrl.RunConfig {
			return agentrl.RunConfig{Steps: 5, OnStep: func(_ context.Context, step int, _ map[string]float64) error {
				if step == 3 {
					return stop
				}
				return nil
			}}
		}, stop, "", 3},
		{"validation", func(context.CancelFunc) agentrl.RunConfig {
			return agentrl.RunConfig{Steps: 5, ValEvery: 1, Validate: func(context.Context, int) (map[string]float64, error) {
				return nil, stop
			}}
		}, stop, "validation at step 1", 1},
		{"steps", func(context.CancelFunc) agentrl.RunConfig { return agentrl.RunConfig{} }, agentrl.ErrTrainerConfig, "RunConfig.Steps", 0},
		{"keep", func(context.CancelFunc) agentrl.RunConfig { return agentrl.RunConfig{Steps: 1, Keep: -1} }, agentrl.ErrTrainerConfig, "RunConfig.Keep", 0},
		{"resume without a folder", func(context.CancelFunc) agentrl.RunConfig { return agentrl.RunConfig{Steps: 1, Resume: true} },
			agentrl.ErrTrainerConfig, "RunConfig.Resume", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr, _ := newBandit(t, banditConfig(), banditReward)
			err := tr.Run(ctx, tc.rc(cancel))
			require.ErrorIs(t, err, tc.want)
			assert.ErrorContains(t, err, tc.msg)
			assert.Equal(t, tc.done, tr.StepsDone())
		})
	}
}

// TestSFTRun: the SFT trainer's Run takes the same RunConfig — its
// epochs' steps by default, val/loss from LossValidator, checkpoints —
// and a run resumed from a checkpoint ends with the weights of an
// uninterrupted one, bit for bit.
func TestSFTRun(t *testing.T) {
	ctx := context.Background()
	data := []agentrl.SFTSample{{IDs: sftIDs, Mask: sftMask}, {IDs: sftIDs[:5], Mask: sftMask[:5]}}
	cfg := sftConfig(1)
	cfg.Epochs, cfg.Seed = 3, 5

	full := newTabular(banditAlphabet)
	var buf bytes.Buffer
	a, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: full, Data: data, Metrics: metrics.NewLogger(&buf)})
	require.NoError(t, err)
	require.NoError(t, a.Run(ctx, agentrl.RunConfig{Validate: a.LossValidator(data[:1]), ValEvery: 3}))
	assert.Equal(t, 6, a.StepsDone(), "3 epochs of 2 updates")
	rows := runLog(t, &buf)
	require.Len(t, rows, 6)
	for _, r := range rows {
		_, ok := r.Values["val/loss"]
		assert.Equal(t, r.Step%3 == 0, ok, "step %d", r.Step)
		assert.Contains(t, r.Values, "train/loss")
	}
	l, err := a.Loss(ctx, data[:1])
	require.NoError(t, err)
	assert.Equal(t, l, rows[5].Values["val/loss"], "val/loss is Loss on the held-out data after the step")

	root := checkpoint.Root{Dir: filepath.Join(t.TempDir(), "sft")}
	part := newTabular(banditAlphabet)
	b, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: part, Data: data})
	require.NoError(t, err)
	require.NoError(t, b.Run(ctx, agentrl.RunConfig{Steps: 3, Checkpoints: root}))

	resumed := newTabular(banditAlphabet)
	c, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: resumed, Data: data})
	require.NoError(t, err)
	require.NoError(t, c.Run(ctx, agentrl.RunConfig{Checkpoints: root, Resume: true}))
	assert.Equal(t, 6, c.StepsDone())
	assert.Equal(t, full.w, resumed.w, "parameters bit for bit")

	other := cfg
	other.Seed = 6
	d, err := agentrl.NewSFTTrainer(other, agentrl.SFTParts{Policy: newTabular(banditAlphabet), Data: data})
	require.NoError(t, err)
	_, err = d.Resume(root)
	require.ErrorIs(t, err, agentrl.ErrCheckpoint)
	assert.ErrorContains(t, err, "seed")
}

// paritySampler answers "c" when a request's seed is even and "a" when it
// is odd, so that a validation's outcome follows from its seeds alone.
type paritySampler struct{}

func (paritySampler) Generate(_ context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	out := make([]lm.Generation, len(reqs))
	for i, r := range reqs {
		tok := tokA
		if r.Params.Seed != nil && *r.Params.Seed%2 == 0 {
			tok = tokC
		}
		out[i] = lm.Generation{Tokens: []int{tok}, FinishReason: lm.FinishLength}
	}
	return out, nil
}

// TestValidate: sample s of prompt i is seeded with Seed + i·N + s. With
// Seed 1 and N 3, prompt 0 draws seeds 1, 2, 3 (a, c, a: mean@3 = 1/3,
// pass@3 = 1) and prompt 1 seeds 4, 5, 6 (c, a, c: mean@3 = 2/3), so the
// source's mean@3 is 1/2 and pass@3 is 1; no tool is called.
func TestValidate(t *testing.T) {
	ctx := context.Background()
	eng, err := rollout.NewEngine(rollout.Config{Sampler: paritySampler{}, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(banditConfig(), agentrl.TrainerParts{Policy: newTabular(banditAlphabet), Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.NoError(t, err)
	vc := agentrl.ValidationConfig{Prompts: []agentrl.Prompt{
		{ID: "x", Tokens: []int{tokA}, DataSource: "s", GroundTruth: "c"}, {ID: "y", Tokens: []int{tokA}, DataSource: "s", GroundTruth: "c"},
	}, N: 3, Seed: 1}
	res, err := tr.Validate(ctx, vc)
	require.NoError(t, err)
	for _, c := range []struct {
		v, name string
		want    float64
	}{{eval.VarAcc, "mean@3", 0.5}, {eval.VarAcc, "pass@3", 1}, {"tool_calls", "mean@3", 0}} {
		got, ok := res.Value("s", c.v, c.name)
		require.True(t, ok, c.name)
		assert.InDelta(t, c.want, got, 1e-12, "%s/%s", c.v, c.name)
	}
	_, err = tr.Validate(ctx, agentrl.ValidationConfig{})
	require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
}
