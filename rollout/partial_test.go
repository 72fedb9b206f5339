package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
)

// versioned is a sampler whose weights change while it generates, as an
// inference fleet's do when the trainer publishes: version v's "model"
// samples, after a context, the letter sampleAt(v, context) with
// log-probability logProbAt(v, context). A generation in flight when the
// version moves is interrupted there (lm.FinishAbort, the tokens so far,
// the version that sampled them), as a server in abort mode answers.
type versioned struct {
	version atomic.Int64
	cuts    atomic.Int64 // generations interrupted after at least one token
}

func hashOf(v int64, ctx []int) uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, v, ctx)
	return h.Sum64()
}

func sampleAt(v int64, ctx []int) int { return 'a' + int(hashOf(v, ctx)%26) }

func logProbAt(v int64, ctx []int) float32 {
	return -float32(1+hashOf(v, ctx)>>40%1000) / 256
}

func (s *versioned) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	out := make([]lm.Generation, len(reqs))
	for i, r := range reqs {
		v := s.version.Load()
		g := lm.Generation{Tokens: []int{}, LogProbs: []float32{}, WeightVersion: strconv.FormatInt(v, 10)}
		seq := append([]int{}, r.Prompt...)
		for len(g.Tokens) < r.Params.MaxNewTokens {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if s.version.Load() != v {
				g.FinishReason = lm.FinishAbort
				if len(g.Tokens) > 0 {
					s.cuts.Add(1)
				}
				break
			}
			tok, lp := sampleAt(v, seq), logProbAt(v, seq)
			seq = append(seq, tok)
			g.Tokens = append(g.Tokens, tok)
			g.LogProbs = append(g.LogProbs, lp)
			runtime.Gosched()
		}
		if g.FinishReason == "" {
			g.FinishReason = lm.FinishLength
		}
		out[i] = g
	}
	return out, nil
}

// TestPartialRolloutsAcrossPublishes runs many long turns at once while
// the sampler's version moves every few hundred microseconds. No
// trajectory is lost or made twice, every turn has its whole budget of
// tokens, and each token is exactly what the version that the
// trajectory records for it samples after the tokens before it, with
// that version's log-probability: the tokens before and after each cut
// come from their own versions, and versions never go back within a
// turn. Run it under the race detector.
func TestPartialRolloutsAcrossPublishes(t *testing.T) {
	const trajectories, budget = 48, 64
	s := &versioned{}
	e := newEngine(t, s, func(c *rollout.Config) { c.MaxTurns = 1; c.MaxResumes = 1000 })
	reqs := make([]rollout.Request, trajectories)
	for i := range reqs {
		reqs[i] = rollout.Request{ID: fmt.Sprint("p", i), Prompt: []int{imStart, 'q', '0' + i%10, imEnd}, Params: lm.SampleParams{MaxNewTokens: budget, Logprobs: true}}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(300 * time.Microsecond):
				s.version.Add(1)
			}
		}
	})
	trajs, err := e.Run(context.Background(), reqs)
	close(done)
	wg.Wait()
	require.NoError(t, err)
	require.Len(t, trajs, trajectories)

	seen := map[string]bool{}
	cutTurns := 0
	for _, tr := range trajs {
		assert.False(t, seen[tr.ID], "trajectory %s made twice", tr.ID)
		seen[tr.ID] = true
		require.Len(t, tr.Turns, 1)
		turn := tr.Turns[0]
		require.Equal(t, budget, turn.End-turn.Start, "%s: the turn has its whole budget", tr.ID)
		assert.Equal(t, lm.FinishLength, turn.Finish)
		versions, ok := tr.TokenVersions()
		require.True(t, ok)
		if turn.Segments != nil {
			cutTurns++
			assert.Equal(t, turn.Start, turn.Segments[0].Start)
			assert.Equal(t, turn.End, turn.Segments[len(turn.Segments)-1].End)
			assert.Equal(t, turn.WeightVersion, turn.Segments[0].WeightVersion, "the turn names its oldest piece's version")
		}
		for i := turn.Start; i < turn.End; i++ {
			v := int64(versions[i])
			require.GreaterOrEqual(t, v, int64(0))
			if i > turn.Start {
				require.GreaterOrEqual(t, versions[i], versions[i-1], "%s: versions go back at token %d", tr.ID, i)
			}
			require.Equal(t, sampleAt(v, tr.Tokens[:i]), tr.Tokens[i], "%s: token %d is not what version %d samples", tr.ID, i, v)
			require.Equal(t, logProbAt(v, tr.Tokens[:i]), tr.LogProbs[i], "%s: token %d's log-prob is not version %d's", tr.ID, i, v)
			require.Equal(t, float32(1), tr.Mask[i])
		}
		oldest, ok := tr.OldestWeightVersion()
		require.True(t, ok)
		assert.Equal(t, versions[turn.Start], oldest)
	}
	assert.Len(t, seen, trajectories)
	t.Logf("%d of %d turns were cut and continued (%d cuts in all)", cutTurns, trajectories, s.cuts.Load())
	require.Positive(t, cutTurns, "no publish landed mid-turn: the test tests nothing")
}

// scriptedPieces answers the i-th call with pieces[i].
type scriptedPieces struct {
	pieces []lm.Generation
	calls  []lm.GenerateRequest
}

func (s *scriptedPieces) Generate(_ context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	s.calls = append(s.calls, reqs[0])
	i := min(len(s.calls), len(s.pieces)) - 1
	return []lm.Generation{s.pieces[i]}, nil
}

func piece(text, version string, finish lm.FinishReason) lm.Generation {
	toks := byteTok{}.Encode(text)
	lps := make([]float32, len(toks))
	for i := range lps {
		lps[i] = -float32(i+1) / 8
	}
	return lm.Generation{Tokens: toks, LogProbs: lps, FinishReason: finish, WeightVersion: version}
}

// TestPartialTurnDetails: how the engine continues an interrupted turn
// — each continuation asks for the prefix so far and the rest of the
// budget; a stop string that spans a cut ends the turn where an
// uninterrupted sampler would have; an interruption that brings no
// token leaves no segment; a turn interrupted more than MaxResumes
// times fails its trajectory.
func TestPartialTurnDetails(t *testing.T) {
	p := []int{imStart, 'q', imEnd}
	t.Run("continuation requests", func(t *testing.T) {
		s := &scriptedPieces{pieces: []lm.Generation{piece("abc", "3", lm.FinishAbort), piece("", "4", lm.FinishAbort), piece("defg", "5", lm.FinishLength)}}
		e := newEngine(t, s, func(c *rollout.Config) { c.MaxTurns = 1 })
		trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "q", Prompt: p, Params: lm.SampleParams{MaxNewTokens: 7, Logprobs: true}}})
		require.NoError(t, err)
		require.Len(t, s.calls, 3)
		assert.Equal(t, p, s.calls[0].Prompt)
		assert.Equal(t, 7, s.calls[0].Params.MaxNewTokens)
		assert.Equal(t, append(append([]int{}, p...), 'a', 'b', 'c'), s.calls[1].Prompt)
		assert.Equal(t, 4, s.calls[1].Params.MaxNewTokens)
		assert.Equal(t, s.calls[1].Prompt, s.calls[2].Prompt)
		tr := trajs[0]
		assert.Equal(t, "abcdefg", string(runesOf(tr.Tokens[len(p):])))
		assert.Equal(t, []rollout.Segment{{Start: 3, End: 6, WeightVersion: "3"}, {Start: 6, End: 10, WeightVersion: "5"}}, tr.Turns[0].Segments)
		assert.Equal(t, "3", tr.Turns[0].WeightVersion)
		assert.Equal(t, []float32{0, 0, 0, -0.125, -0.25, -0.375, -0.125, -0.25, -0.375, -0.5}, tr.LogProbs)
		vs, ok := tr.TokenVersions()
		require.True(t, ok)
		assert.Equal(t, []int{-1, -1, -1, 3, 3, 3, 5, 5, 5, 5}, vs)
	})
	t.Run("cut before the first token", func(t *testing.T) {
		s := &scriptedPieces{pieces: []lm.Generation{piece("", "3", lm.FinishAbort), piece("abcd", "4", lm.FinishLength)}}
		e := newEngine(t, s, func(c *rollout.Config) { c.MaxTurns = 1 })
		trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "q", Prompt: p, Params: lm.SampleParams{MaxNewTokens: 4, Logprobs: true}}})
		require.NoError(t, err)
		turn := trajs[0].Turns[0]
		assert.Equal(t, "4", turn.WeightVersion, "version 3 sampled none of the turn's tokens")
		assert.Nil(t, turn.Segments)
		vs, ok := trajs[0].TokenVersions()
		require.True(t, ok)
		assert.Equal(t, []int{-1, -1, -1, 4, 4, 4, 4}, vs)
	})
	t.Run("stop string across the cut", func(t *testing.T) {
		s := &scriptedPieces{pieces: []lm.Generation{piece("xx</to", "1", lm.FinishAbort), piece("ol>yy", "2", lm.FinishLength)}}
		e := newEngine(t, s, func(c *rollout.Config) { c.MaxTurns = 1 })
		trajs, err := e.Run(context.Background(), []rollout.Request{{ID: "q", Prompt: p, Params: lm.SampleParams{MaxNewTokens: 20, Stop: []string{"</tool>"}}}})
		require.NoError(t, err)
		turn := trajs[0].Turns[0]
		assert.Equal(t, "xx</tool>", turn.Text)
		assert.Equal(t, lm.FinishStop, turn.Finish)
		assert.Equal(t, "</tool>", turn.StopString)
		assert.Equal(t, []rollout.Segment{{Start: 3, End: 9, WeightVersion: "1"}, {Start: 9, End: 12, WeightVersion: "2"}}, turn.Segments)
		assert.Len(t, trajs[0].Tokens, 12)
	})
	t.Run("interrupted too often", func(t *testing.T) {
		s := &scriptedPieces{pieces: []lm.Generation{piece("a", "1", lm.FinishAbort)}}
		e := newEngine(t, s, func(c *rollout.Config) { c.MaxTurns = 1; c.MaxResumes = 2 })
		_, err := e.Run(context.Background(), []rollout.Request{{ID: "q", Prompt: p, Params: lm.SampleParams{MaxNewTokens: 20}}})
		require.Error(t, err)
		assert.True(t, errors.Is(err, rollout.ErrInterrupted), "%v", err)
		assert.Len(t, s.calls, 3)
	})
	t.Run("negative MaxResumes", func(t *testing.T) {
		_, err := rollout.NewEngine(rollout.Config{Sampler: &versioned{}, Tokenizer: byteTok{}, MaxTurns: 1, MaxResumes: -1})
		require.ErrorIs(t, err, rollout.ErrConfig)
	})
}

func runesOf(ids []int) []rune {
	r := make([]rune, len(ids))
	for i, id := range ids {
		r[i] = rune(id)
	}
	return r
}
