package ablation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy"
)

// userRegistry holds "user-reinforce", a user's objective: plain
// −A·r per token (the ratio r = exp(logπ − logπ_old), no clip).
func userRegistry(t *testing.T) *loss.Registry {
	t.Helper()
	reg := loss.NewRegistry()
	require.NoError(t, reg.Register("user-reinforce", loss.Variant{Build: func(in *loss.Inputs) (loss.Term, error) {
		delta, err := gorgonia.Sub(in.LogProbs, in.OldLogProbs)
		if err != nil {
			return loss.Term{}, err
		}
		ratio, err := gorgonia.Exp(delta)
		if err != nil {
			return loss.Term{}, err
		}
		gain, err := gorgonia.HadamardProd(ratio, in.Advantages)
		if err != nil {
			return loss.Term{}, err
		}
		perToken, err := gorgonia.Neg(gain)
		return loss.Term{PerToken: perToken}, err
	}}))
	return reg
}

func TestVariantApply(t *testing.T) {
	base := agentrl.GRPOTCR()
	reg := userRegistry(t)
	for _, tc := range []struct {
		name    string
		v       Variant
		check   func(t *testing.T, c agentrl.TrainerConfig)
		wantErr string
	}{
		{name: "nil edit is the base", v: Variant{Name: "grpo-tcr"}, check: func(t *testing.T, c agentrl.TrainerConfig) {
			assert.Equal(t, base, c)
		}},
		{name: "symmetric clip", v: Variant{Name: "clip-sym", Edit: func(c *agentrl.TrainerConfig) { c.Loss.ClipHigh = 0.2 }},
			check: func(t *testing.T, c agentrl.TrainerConfig) {
				assert.Equal(t, 0.2, c.Loss.ClipHigh)
				assert.Equal(t, 0.2, c.Loss.ClipLow)
			}},
		{name: "user loss with its registry", v: Variant{Name: "user", Losses: reg,
			Edit: func(c *agentrl.TrainerConfig) { c.Loss.Mode = "user-reinforce" }},
			check: func(t *testing.T, c agentrl.TrainerConfig) { assert.Equal(t, loss.Mode("user-reinforce"), c.Loss.Mode) }},
		{name: "user estimator resolved in its registry", v: Variant{Name: "est", Estimators: advantage.NewRegistry(),
			Edit: func(c *agentrl.TrainerConfig) { c.Advantage.Estimator = advantage.RLOO }},
			check: func(t *testing.T, c agentrl.TrainerConfig) { assert.Equal(t, advantage.RLOO, c.Advantage.Estimator) }},
		{name: "user loss without its registry", v: Variant{Name: "user",
			Edit: func(c *agentrl.TrainerConfig) { c.Loss.Mode = "user-reinforce" }},
			wantErr: `variant "user"`},
		{name: "invalid dual clip", v: Variant{Name: "bad-c", Edit: func(c *agentrl.TrainerConfig) { c.Loss.ClipC = 0.5 }},
			wantErr: `variant "bad-c"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.v.Apply(base)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, agentrl.ErrTrainerConfig)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

// An edit through the copy's pointers and slices leaves the base alone.
func TestVariantApplyDoesNotChangeBase(t *testing.T) {
	base := agentrl.GRPOTCR()
	seed := uint64(7)
	norm := true
	base.Sampling.Seed = &seed
	base.Sampling.Stop = []string{"</answer>"}
	base.Advantage.NormByStd = &norm
	base.DynamicSampling = &agentrl.DynamicSamplingConfig{MaxGenBatches: 3}
	base.LoRA = &policy.LoRAConfig{Rank: 8, TargetModules: []string{policy.LoRAAllLinear}}
	v := Variant{Name: "edit-all", Edit: func(c *agentrl.TrainerConfig) {
		c.Overlong.Buffer = 1
		*c.Sampling.Seed = 8
		c.Sampling.Stop[0] = "changed"
		*c.Advantage.NormByStd = false
		c.DynamicSampling.MaxGenBatches = 5
		c.LoRA.Rank = 4
		c.LoRA.TargetModules[0] = "q_proj"
	}}
	c, err := v.Apply(base)
	require.NoError(t, err)
	assert.Equal(t, 1, c.Overlong.Buffer)
	assert.Equal(t, 4096, base.Overlong.Buffer, "GRPOTCR's buffer, untouched")
	assert.Equal(t, uint64(7), seed)
	assert.Equal(t, []string{"</answer>"}, base.Sampling.Stop)
	assert.True(t, norm)
	assert.Equal(t, 5, c.DynamicSampling.MaxGenBatches)
	assert.Equal(t, 3, base.DynamicSampling.MaxGenBatches)
	assert.Equal(t, policy.LoRAConfig{Rank: 8, TargetModules: []string{policy.LoRAAllLinear}}, *base.LoRA)
}

func okRun(_ context.Context, v Variant, seed uint64) (Result, error) {
	return Result{Final: map[string]float64{"x": float64(seed)}}, nil
}

func TestGridValidate(t *testing.T) {
	vs := []Variant{{Name: "a"}, {Name: "b"}}
	for _, tc := range []struct {
		name string
		g    Grid
		want string
	}{
		{"no variants", Grid{Seeds: []uint64{1}, Run: okRun}, "no variants"},
		{"no seeds", Grid{Variants: vs, Run: okRun}, "no seeds"},
		{"no run", Grid{Variants: vs, Seeds: []uint64{1}}, "Run is nil"},
		{"negative parallel", Grid{Variants: vs, Seeds: []uint64{1}, Run: okRun, Parallel: -1}, "Parallel -1"},
		{"unnamed variant", Grid{Variants: []Variant{{Name: "a"}, {}}, Seeds: []uint64{1}, Run: okRun}, "variant 1 has no name"},
		{"duplicate variant", Grid{Variants: []Variant{{Name: "a"}, {Name: "a"}}, Seeds: []uint64{1}, Run: okRun}, `"a" appears twice`},
		{"duplicate seed", Grid{Variants: vs, Seeds: []uint64{1, 2, 1}, Run: okRun}, "seed 1 appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.g.Validate()
			require.ErrorIs(t, err, ErrGrid)
			assert.Contains(t, err.Error(), tc.want)
			_, err = tc.g.Execute(context.Background())
			assert.ErrorIs(t, err, ErrGrid, "Execute validates first")
		})
	}
	assert.NoError(t, Grid{Variants: vs, Seeds: []uint64{1, 2}, Run: okRun}.Validate())
}

// Runs finish in the reverse of grid order (earlier runs sleep longer);
// the results still come in grid order, no more than Parallel run at
// once, and Done sees every run, one call at a time.
func TestExecuteOrderAndLimit(t *testing.T) {
	for _, parallel := range []int{1, 2, 3, 0} {
		t.Run(fmt.Sprint("parallel ", parallel), func(t *testing.T) {
			var running, peak, inDone atomic.Int32
			var mu sync.Mutex
			var done []string
			g := Grid{
				Variants: []Variant{{Name: "a"}, {Name: "b"}, {Name: "c"}},
				Seeds:    []uint64{10, 20},
				Parallel: parallel,
				Run: func(ctx context.Context, v Variant, seed uint64) (Result, error) {
					n := running.Add(1)
					defer running.Add(-1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					// a/10 sleeps longest, c/20 shortest.
					time.Sleep(time.Duration(int('c'-v.Name[0])*2+int(20-seed)/10) * 3 * time.Millisecond)
					return Result{Variant: "ignored", Final: map[string]float64{"seed": float64(seed)}}, nil
				},
				Done: func(r Result) {
					assert.Equal(t, int32(1), inDone.Add(1), "Done calls overlap")
					mu.Lock()
					done = append(done, fmt.Sprintf("%s/%d", r.Variant, r.Seed))
					mu.Unlock()
					inDone.Add(-1)
				},
			}
			res, err := g.Execute(context.Background())
			require.NoError(t, err)
			var got []string
			for _, r := range res {
				got = append(got, fmt.Sprintf("%s/%d", r.Variant, r.Seed))
				assert.Equal(t, float64(r.Seed), r.Final["seed"])
				assert.Positive(t, r.Seconds)
			}
			assert.Equal(t, []string{"a/10", "a/20", "b/10", "b/20", "c/10", "c/20"}, got)
			assert.ElementsMatch(t, got, done)
			if parallel > 0 {
				assert.LessOrEqual(t, peak.Load(), int32(parallel))
			}
		})
	}
}

// The first failure cancels the runs still going and names its variant
// and seed; no results come back.
func TestExecuteFirstErrorCancels(t *testing.T) {
	boom := errors.New("boom")
	var cancelled atomic.Int32
	var others sync.WaitGroup // the three runs that wait
	others.Add(3)
	g := Grid{
		Variants: []Variant{{Name: "slow"}, {Name: "fails"}},
		Seeds:    []uint64{1, 2},
		Parallel: 4,
		Run: func(ctx context.Context, v Variant, seed uint64) (Result, error) {
			if v.Name == "fails" && seed == 2 {
				others.Wait() // fail once the others are running
				return Result{}, boom
			}
			others.Done()
			select {
			case <-ctx.Done():
				cancelled.Add(1)
				return Result{}, ctx.Err()
			case <-time.After(10 * time.Second):
				return Result{}, errors.New("not cancelled")
			}
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := g.Execute(ctx)
	require.ErrorIs(t, err, boom)
	assert.Equal(t, `ablation: variant "fails", seed 2: boom`, err.Error())
	assert.Nil(t, res)
	assert.Equal(t, int32(3), cancelled.Load(), "the three other runs saw the cancellation")
}

func TestExecuteCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	_, err := Grid{Variants: []Variant{{Name: "a"}}, Seeds: []uint64{1}, Run: func(context.Context, Variant, uint64) (Result, error) {
		ran = true
		return Result{}, nil
	}}.Execute(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), `variant "a", seed 1: not started`)
	assert.False(t, ran)
}
