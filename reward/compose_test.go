package reward

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSourceKind(t *testing.T) {
	cases := map[string]string{
		"openai/gsm8k": KindMath, "lighteval/MATH": KindMath, "DigitalLearningGmbH/MATH-lighteval": KindMath,
		"math_dapo": KindMath, "aime2024": KindMath, "AIME25": KindMath, "numina_olympiads": KindMath,
		"codecontests": KindCode, "apps": KindCode, "taco": KindCode, "codeforces": KindCode,
		"livecodebench_v6": KindCode, "hiyouga/geometry3k": "", "searchR1_nq": "", "": "",
	}
	for ds, want := range cases {
		assert.Equal(t, want, SourceKind(ds), ds)
	}
}

func TestRouter(t *testing.T) {
	tag := func(name string) Func {
		return func(ctx context.Context, in Input) (Output, error) { return Output{Reason: name}, nil }
	}
	r := Router{Sources: map[string]Func{"special": tag("special")}, Math: tag("math"), Code: tag("code")}
	f := r.Func()
	for ds, want := range map[string]string{"special": "special", "aime2024": "math", "taco": "code"} {
		out, err := f(context.Background(), Input{DataSource: ds})
		require.NoError(t, err)
		assert.Equal(t, want, out.Reason, ds)
	}
	_, err := f(context.Background(), Input{DataSource: "unknown_set"})
	require.ErrorIs(t, err, ErrUnknownSource)
	require.ErrorContains(t, err, `"unknown_set"`)

	r.Default = tag("default")
	out, err := r.Func()(context.Background(), Input{DataSource: "unknown_set"})
	require.NoError(t, err)
	assert.Equal(t, "default", out.Reason)
}

func TestCombine(t *testing.T) {
	f, err := Combine(
		Part{Name: "acc", Weight: 1, Func: constFunc(-1, false)},
		Part{Name: "format", Weight: 0.5, Func: constFunc(0.2, true)},
	)
	require.NoError(t, err)
	out, err := f(context.Background(), Input{})
	require.NoError(t, err)
	// 1·(−1) + 0.5·0.2 = −0.9
	assert.InDelta(t, -0.9, out.Score, 1e-12)
	assert.False(t, out.Acc, "Acc comes from the first part")
	assert.Equal(t, map[string]float64{"acc": -1, "format": 0.1}, out.Parts)
	assert.Equal(t, "acc: const; format: const", out.Reason)

	// Nested parts keep their names under the part's prefix.
	shaped, err := WithOverlong(constFunc(1, true), OverlongConfig{MaxLen: 10, Buffer: 5, Factor: 1})
	require.NoError(t, err)
	g, err := Combine(Part{Name: "task", Weight: 2, Func: shaped})
	require.NoError(t, err)
	out, err = g(context.Background(), Input{ResponseTokens: 10})
	require.NoError(t, err)
	// shaped: 1 − (10−5)/5 = 0; weighted 0; its overlong part −1 → −2
	assert.InDelta(t, 0, out.Score, 1e-12)
	assert.InDelta(t, -2, out.Parts["task/overlong"], 1e-12)

	boom := errors.New("boom")
	h, err := Combine(Part{Name: "a", Weight: 1, Func: func(context.Context, Input) (Output, error) { return Output{}, boom }})
	require.NoError(t, err)
	_, err = h(context.Background(), Input{})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, `part "a"`)

	for _, bad := range [][]Part{
		nil,
		{{Name: "a", Weight: 1}},
		{{Name: "", Weight: 1, Func: constFunc(0, false)}},
		{{Name: "a", Weight: 1, Func: constFunc(0, false)}, {Name: "a", Weight: 1, Func: constFunc(0, false)}},
		{{Name: "a", Weight: math.Inf(1), Func: constFunc(0, false)}},
	} {
		_, err := Combine(bad...)
		assert.ErrorIs(t, err, ErrConfig)
	}
}

func TestBatch(t *testing.T) {
	var inFlight, peak atomic.Int32
	f := func(ctx context.Context, in Input) (Output, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		switch in.GroundTruth {
		case "hang": // honours its context
			<-ctx.Done()
			return Output{}, ctx.Err()
		case "deaf": // ignores its context
			time.Sleep(300 * time.Millisecond)
			return Output{Score: 7}, nil
		case "panic":
			panic("scorer bug")
		}
		time.Sleep(5 * time.Millisecond)
		return Output{Score: float64(len(in.GroundTruth)), Reason: in.GroundTruth}, nil
	}
	ins := []Input{{GroundTruth: "a"}, {GroundTruth: "bb"}, {GroundTruth: "hang"}, {GroundTruth: "ccc"}, {GroundTruth: "deaf"}, {GroundTruth: "dddd"}}
	start := time.Now()
	outs, err := Batch(context.Background(), f, ins, BatchOptions{Limit: 2, ItemTimeout: 50 * time.Millisecond, TimeoutScore: -1})
	require.NoError(t, err)
	require.Len(t, outs, len(ins))
	assert.Equal(t, 1.0, outs[0].Score)
	assert.Equal(t, 2.0, outs[1].Score)
	assert.Equal(t, -1.0, outs[2].Score)
	assert.Contains(t, outs[2].Reason, "timed out after 50ms")
	assert.Equal(t, 3.0, outs[3].Score)
	assert.Equal(t, -1.0, outs[4].Score, "a Func that ignores its context still gets cut off")
	assert.Equal(t, 4.0, outs[5].Score)
	assert.LessOrEqual(t, peak.Load(), int32(3), "Limit 2, plus at most one abandoned deaf scorer")
	assert.Less(t, time.Since(start), 5*time.Second)

	_, err = Batch(context.Background(), f, []Input{{GroundTruth: "x"}, {GroundTruth: "panic"}}, BatchOptions{})
	require.ErrorContains(t, err, "item 1: reward function panicked: scorer bug")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Batch(ctx, f, ins, BatchOptions{})
	require.ErrorIs(t, err, context.Canceled)

	_, err = Batch(context.Background(), nil, ins, BatchOptions{})
	require.ErrorIs(t, err, ErrConfig)
	_, err = Batch(context.Background(), f, ins, BatchOptions{Limit: -1})
	require.ErrorIs(t, err, ErrConfig)

	outs, err = Batch(context.Background(), f, nil, BatchOptions{})
	require.NoError(t, err)
	assert.Empty(t, outs)
}

// TestBatchMath runs the real math scorer over the corpus in a batch, the
// way a trainer would, and checks the verdicts match the labels.
func TestBatchMath(t *testing.T) {
	cases := loadMathCases(t)
	f, err := MathFunc(MathConfig{Correct: 1, Wrong: 0})
	require.NoError(t, err)
	ins := make([]Input, len(cases))
	for i, c := range cases {
		ins[i] = Input{Response: c.Response, GroundTruth: c.Gold, DataSource: "math_dapo"}
	}
	outs, err := Batch(context.Background(), Router{Math: f}.Func(), ins, BatchOptions{Limit: 4, ItemTimeout: 10 * time.Second})
	require.NoError(t, err)
	for i, c := range cases {
		assert.Equal(t, c.Expected, outs[i].Acc, "case %d: %s", c.ID, outs[i].Reason)
	}
}
