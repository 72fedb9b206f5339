package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rankByLength is a group reward that scores each member its rank by
// response length within the group (0 for the shortest), and records the
// groups it was given.
type rankByLength struct {
	calls atomic.Int32
	seen  chan []string
}

func (r *rankByLength) fn(_ context.Context, group []Input) ([]Output, error) {
	r.calls.Add(1)
	resp := make([]string, len(group))
	outs := make([]Output, len(group))
	for i, in := range group {
		resp[i] = in.Response
		for _, other := range group {
			if len(other.Response) < len(in.Response) {
				outs[i].Score++
			}
		}
		outs[i].Reason = "rank"
	}
	if r.seen != nil {
		r.seen <- resp
	}
	return outs, nil
}

func TestBatchGroups(t *testing.T) {
	r := &rankByLength{seen: make(chan []string, 8)}
	inputs := []Input{{Response: "aaa"}, {Response: "x"}, {Response: "a"}, {Response: "xxxx"}, {Response: "aa"}, {Response: "xx"}}
	groups := []string{"a", "x", "a", "x", "a", "x"}
	outs, err := BatchGroups(context.Background(), r.fn, inputs, groups, BatchOptions{})
	require.NoError(t, err)
	// Ranks by length within each group: a: aaa→2, a→0, aa→1; x: x→0, xxxx→2, xx→1.
	scores := make([]float64, len(outs))
	for i, o := range outs {
		scores[i] = o.Score
	}
	assert.Equal(t, []float64{2, 0, 0, 2, 1, 1}, scores)
	close(r.seen)
	var seen [][]string
	for s := range r.seen {
		seen = append(seen, s)
	}
	assert.ElementsMatch(t, [][]string{{"aaa", "a", "aa"}, {"x", "xxxx", "xx"}}, seen, "members together, in input order")
}

func TestBatchGroupsLimit(t *testing.T) {
	var inFlight, peak atomic.Int32
	g := func(ctx context.Context, group []Input) ([]Output, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		return make([]Output, len(group)), nil
	}
	inputs := make([]Input, 12)
	groups := make([]string, 12)
	for i := range groups {
		groups[i] = fmt.Sprint(i % 6)
	}
	_, err := BatchGroups(context.Background(), g, inputs, groups, BatchOptions{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, int32(2), peak.Load())
}

func TestBatchGroupsFaults(t *testing.T) {
	inputs := []Input{{Response: "a"}, {Response: "b"}, {Response: "c"}}
	groups := []string{"g", "g", "h"}
	hang := func(ctx context.Context, group []Input) ([]Output, error) {
		if group[0].Response == "c" {
			time.Sleep(time.Hour) // ignores its context
		}
		return make([]Output, len(group)), nil
	}
	start := time.Now()
	outs, err := BatchGroups(context.Background(), hang, inputs, groups, BatchOptions{ItemTimeout: 30 * time.Millisecond, TimeoutScore: -3})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, 0.0, outs[0].Score)
	assert.Equal(t, -3.0, outs[2].Score)
	assert.Equal(t, "group reward timed out after 30ms", outs[2].Reason)

	for name, g := range map[string]GroupFunc{
		"panics":     func(context.Context, []Input) ([]Output, error) { panic("boom") },
		"errs":       func(context.Context, []Input) ([]Output, error) { return nil, errors.New("boom") },
		"miscounts":  func(context.Context, []Input) ([]Output, error) { return make([]Output, 1), nil },
		"no outputs": func(context.Context, []Input) ([]Output, error) { return nil, nil },
	} {
		_, err := BatchGroups(context.Background(), g, inputs, []string{"g", "g", "g"}, BatchOptions{})
		require.Error(t, err, name)
		assert.ErrorContains(t, err, `group "g"`, name)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = BatchGroups(ctx, hang, inputs, groups, BatchOptions{})
	assert.ErrorIs(t, err, context.Canceled)

	r := &rankByLength{}
	for name, call := range map[string]func() error{
		"nil": func() error {
			_, err := BatchGroups(context.Background(), nil, inputs, groups, BatchOptions{})
			return err
		},
		"mismatched": func() error {
			_, err := BatchGroups(context.Background(), r.fn, inputs, groups[:2], BatchOptions{})
			return err
		},
		"negative": func() error {
			_, err := BatchGroups(context.Background(), r.fn, inputs, groups, BatchOptions{Limit: -1})
			return err
		},
	} {
		assert.ErrorIs(t, call(), ErrConfig, name)
	}
	outs, err = BatchGroups(context.Background(), r.fn, nil, nil, BatchOptions{})
	require.NoError(t, err)
	assert.Empty(t, outs)
}

// pass accepts responses that start with "ok".
func pass(_ context.Context, in Input) (Output, error) {
	if len(in.Response) >= 2 && in.Response[:2] == "ok" {
		return Output{Score: 1, Acc: true, Reason: "ok"}, nil
	}
	return Output{Score: -1, Reason: "not ok"}, nil
}

func TestGate(t *testing.T) {
	var judged atomic.Int32
	judge := func(_ context.Context, in Input) (Output, error) {
		judged.Add(1)
		return Output{Score: 0.7, Reason: "judged"}, nil
	}
	f, err := Gate(pass, judge)
	require.NoError(t, err)
	out, err := f(context.Background(), Input{Response: "bad"})
	require.NoError(t, err)
	assert.Equal(t, Output{Score: -1, Reason: "gate: not ok"}, out)
	assert.Zero(t, judged.Load())
	out, err = f(context.Background(), Input{Response: "ok fine"})
	require.NoError(t, err)
	assert.Equal(t, Output{Score: 0.7, Reason: "judged"}, out)
	assert.Equal(t, int32(1), judged.Load())

	boom := errors.New("boom")
	g, err := Gate(func(context.Context, Input) (Output, error) { return Output{}, boom }, judge)
	require.NoError(t, err)
	_, err = g(context.Background(), Input{})
	assert.ErrorIs(t, err, boom)
	_, err = Gate(nil, judge)
	assert.ErrorIs(t, err, ErrConfig)
}

func TestGroupGate(t *testing.T) {
	r := &rankByLength{seen: make(chan []string, 2)}
	g, err := GroupGate(pass, r.fn)
	require.NoError(t, err)
	outs, err := g(context.Background(), []Input{{Response: "okay!"}, {Response: "no"}, {Response: "ok"}, {Response: "nope"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"okay!", "ok"}, <-r.seen, "only the passing members are judged")
	assert.Equal(t, []Output{
		{Score: 1, Reason: "rank"}, {Score: -1, Reason: "gate: not ok"},
		{Score: 0, Reason: "rank"}, {Score: -1, Reason: "gate: not ok"},
	}, outs)

	outs, err = g(context.Background(), []Input{{Response: "no"}})
	require.NoError(t, err)
	assert.Equal(t, []Output{{Score: -1, Reason: "gate: not ok"}}, outs)
	assert.Equal(t, int32(1), r.calls.Load(), "nothing passed: the group reward is not called")

	bad, err := GroupGate(pass, func(context.Context, []Input) ([]Output, error) { return nil, nil })
	require.NoError(t, err)
	_, err = bad(context.Background(), []Input{{Response: "ok"}})
	assert.ErrorContains(t, err, "0 outputs for 1 inputs")
	_, err = GroupGate(pass, nil)
	assert.ErrorIs(t, err, ErrConfig)
}

func TestCombineGroup(t *testing.T) {
	r := &rankByLength{}
	f, err := CombineGroup(
		GroupPart{Name: "rank", Weight: 0.5, Group: r.fn},
		GroupPart{Name: "ok", Weight: 2, Func: pass},
	)
	require.NoError(t, err)
	outs, err := f(context.Background(), []Input{{Response: "ok"}, {Response: "nope"}})
	require.NoError(t, err)
	// ok: 0.5·0 + 2·1 = 2; nope: 0.5·1 + 2·(−1) = −1.5
	assert.Equal(t, Output{Score: 2, Parts: map[string]float64{"rank": 0, "ok": 2}, Reason: "rank: rank; ok: ok"}, outs[0])
	assert.Equal(t, Output{Score: -1.5, Parts: map[string]float64{"rank": 0.5, "ok": -2}, Reason: "rank: rank; ok: not ok"}, outs[1])

	for name, parts := range map[string][]GroupPart{
		"none":      nil,
		"neither":   {{Name: "a", Weight: 1}},
		"both":      {{Name: "a", Weight: 1, Func: pass, Group: r.fn}},
		"unnamed":   {{Weight: 1, Func: pass}},
		"duplicate": {{Name: "a", Weight: 1, Func: pass}, {Name: "a", Weight: 1, Group: r.fn}},
		"NaN":       {{Name: "a", Weight: math.NaN(), Func: pass}},
	} {
		_, err := CombineGroup(parts...)
		assert.ErrorIs(t, err, ErrConfig, name)
	}
	boom := errors.New("boom")
	h, err := CombineGroup(GroupPart{Name: "x", Weight: 1, Func: func(context.Context, Input) (Output, error) { return Output{}, boom }})
	require.NoError(t, err)
	_, err = h(context.Background(), []Input{{}})
	assert.ErrorIs(t, err, boom)
	assert.ErrorContains(t, err, `part "x": member 0`)
}

func TestShapeGroup(t *testing.T) {
	r := &rankByLength{}
	oc := OverlongConfig{MaxLen: 10, Buffer: 4}
	g, err := ShapeGroup(r.fn, func(f Func) (Func, error) { return WithOverlong(f, oc) })
	require.NoError(t, err)
	outs, err := g(context.Background(), []Input{{Response: "a", ResponseTokens: 6}, {Response: "bb", ResponseTokens: 8}, {Response: "ccc", ResponseTokens: 10}})
	require.NoError(t, err)
	// rank + min(−(L−6)/4, 0): 0+0, 1−0.5, 2−1
	for i, want := range []float64{0, 0.5, 1} {
		assert.InDelta(t, want, outs[i].Score, 1e-12, "member %d", i)
	}
	assert.InDelta(t, -1, outs[2].Parts["overlong"], 1e-12)

	_, err = ShapeGroup(r.fn, func(f Func) (Func, error) { return WithOverlong(f, OverlongConfig{}) })
	assert.ErrorIs(t, err, ErrConfig, "a bad shaping fails at construction")
	_, err = ShapeGroup(nil, func(f Func) (Func, error) { return f, nil })
	assert.ErrorIs(t, err, ErrConfig)
}
