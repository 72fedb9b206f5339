package judge

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/reward"
)

// group is four responses to one prompt, the second and fourth alike.
func group() []reward.Input {
	g := make([]reward.Input, 4)
	for i, r := range []string{"42", "41", "The answer is 42.", "41"} {
		g[i] = reward.Input{Prompt: "What is 6·7?", GroundTruth: "42", Response: r}
	}
	return g
}

func ranking(t *testing.T, j *Judge, c RankingConfig) reward.GroupFunc {
	t.Helper()
	g, err := j.Ranking(c)
	require.NoError(t, err)
	return g
}

const threeScores = "```json\n" + `{"scores": [{"id": "1", "explanation": "right, terse", "score": 0.9},
 {"id": 2, "explanation": "wrong", "score": 0.1}, {"id": "3", "explanation": "right, explained", "score": "1"}]}` + "\n```"

func TestRankingRequestAndVerdict(t *testing.T) {
	s := newScripted(t, step{reply: threeScores})
	j := newJudge(t, fast(s.url()))
	g := ranking(t, j, RankingConfig{PassScore: 0.9, JSONSchema: true})
	outs, err := g(context.Background(), group())
	require.NoError(t, err)
	require.Len(t, outs, 4)
	// Members map to the distinct responses 1, 2, 3, 2.
	scores := []float64{outs[0].Score, outs[1].Score, outs[2].Score, outs[3].Score}
	assert.Equal(t, []float64{0.9, 0.1, 1, 0.1}, scores)
	assert.Equal(t, []bool{true, false, true, false}, []bool{outs[0].Acc, outs[1].Acc, outs[2].Acc, outs[3].Acc})
	assert.Equal(t, "judge: 0.1 as response 2 of 3: wrong", outs[3].Reason)

	require.Equal(t, 1, s.sent())
	msgs := s.messages(t, 0)
	require.Len(t, msgs, 2)
	assert.Contains(t, msgs[0].Content, DefaultRankingRubric)
	assert.Equal(t, "<task>\nWhat is 6·7?\n</task>\n\n<reference>\n42\n</reference>\n\n"+
		"<response id=\"1\">\n42\n</response>\n\n<response id=\"2\">\n41\n</response>\n\n<response id=\"3\">\nThe answer is 42.\n</response>", msgs[1].Content)
	format, err := json.Marshal(s.request(0)["response_format"])
	require.NoError(t, err)
	assert.JSONEq(t, `{"type": "json_schema", "json_schema": {"name": "group_scores", "strict": true, "schema": {
		"type": "object", "additionalProperties": false, "required": ["scores"],
		"properties": {"scores": {"type": "array", "items": {"type": "object", "additionalProperties": false,
			"required": ["id", "explanation", "score"],
			"properties": {"id": {"type": "string"}, "explanation": {"type": "string"}, "score": {"type": "number"}}}}}}}}`, string(format))
	st := j.Stats()
	assert.Equal(t, int64(1), st.Verdicts)

	// The same group again comes from the cache.
	_, err = g(context.Background(), group())
	require.NoError(t, err)
	assert.Equal(t, 1, s.sent())
	assert.Equal(t, int64(1), j.Stats().CacheHits)
}

func TestRankingFaults(t *testing.T) {
	cases := []struct {
		name   string
		steps  []step
		cfg    func(*Config)
		scores []float64
		reason string
		want   Stats
	}{
		{
			name:   "too few scores, then right",
			steps:  []step{{reply: `{"scores": [{"id": "1", "explanation": "", "score": 1}]}`}, {reply: threeScores}},
			scores: []float64{0.9, 0.1, 1, 0.1}, reason: "as response",
			want: Stats{Requests: 2, Malformed: 1, Verdicts: 1},
		},
		{
			name:   "never JSON",
			steps:  []step{{reply: "Response 1 is best."}},
			scores: []float64{-1, -1, -1, -1}, reason: `judge: no verdict on the group (3 malformed replies, the last: malformed verdict: no JSON object with "scores"); fallback score -1`,
			want: Stats{Requests: 3, Malformed: 3, Fallbacks: 4},
		},
		{
			name:   "always 503",
			steps:  []step{{status: 503}},
			cfg:    func(c *Config) { c.Retries = 1 },
			scores: []float64{-1, -1, -1, -1}, reason: "judge failed",
			want: Stats{Requests: 2, Retries: 1, Failures: 1, Fallbacks: 4},
		},
		{
			name:   "hangs",
			steps:  []step{{delay: time.Minute}},
			cfg:    func(c *Config) { c.Timeout, c.Retries = 20*time.Millisecond, -1 },
			scores: []float64{-1, -1, -1, -1}, reason: "request timed out",
			want: Stats{Requests: 1, Timeouts: 1, Failures: 1, Fallbacks: 4},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newScripted(t, c.steps...)
			cfg := fast(s.url())
			if c.cfg != nil {
				c.cfg(&cfg)
			}
			j := newJudge(t, cfg)
			outs, err := ranking(t, j, RankingConfig{Fallback: -1})(context.Background(), group())
			require.NoError(t, err)
			for i, o := range outs {
				assert.InDelta(t, c.scores[i], o.Score, 1e-12, "member %d", i)
				assert.Contains(t, o.Reason, c.reason)
			}
			got := j.Stats()
			got.LatencyTotal, got.LatencyMax, got.LastError, got.PromptTokens, got.CompletionTokens = 0, 0, "", 0, 0
			assert.Equal(t, c.want, got)
		})
	}
}

func TestRankingGroupContract(t *testing.T) {
	s := newScripted(t, step{reply: `{"scores": [{"id": "1", "explanation": "only one", "score": 0.5}]}`})
	j := newJudge(t, fast(s.url()))
	g := ranking(t, j, RankingConfig{})
	outs, err := g(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, outs)
	assert.Zero(t, s.sent(), "an empty group asks nothing")

	bad := group()
	bad[2].Prompt = "Another task"
	_, err = g(context.Background(), bad)
	require.ErrorContains(t, err, "member 2 has another prompt")

	// All alike: one response shown, its score for all.
	same := group()
	for i := range same {
		same[i].Response = "42"
	}
	outs, err = g(context.Background(), same)
	require.NoError(t, err)
	for _, o := range outs {
		assert.Equal(t, 0.5, o.Score)
	}
	assert.NotContains(t, s.messages(t, 0)[1].Content, `id="2"`)
}

// TestRankingComposes: a format gate before the judge (responses without
// a boxed answer never reach it), a weighted rule beside it, BatchGroups
// over two groups, overlong shaping on top.
func TestRankingComposes(t *testing.T) {
	s := newScripted(t, step{reply: `{"scores": [{"id": "1", "explanation": "", "score": 1}, {"id": "2", "explanation": "", "score": 0.25}]}`})
	j := newJudge(t, fast(s.url()))
	judged, err := reward.GroupGate(reward.FormatFunc(reward.FormatConfig{RequireBoxed: true, Penalty: -1, Reward: 1}), ranking(t, j, RankingConfig{}))
	require.NoError(t, err)
	length := func(_ context.Context, in reward.Input) (reward.Output, error) {
		return reward.Output{Score: float64(len(in.Response)) / 100}, nil
	}
	combined, err := reward.CombineGroup(
		reward.GroupPart{Name: "judge", Weight: 1, Group: judged},
		reward.GroupPart{Name: "length", Weight: -0.5, Func: length},
	)
	require.NoError(t, err)
	shaped, err := reward.ShapeGroup(combined, func(f reward.Func) (reward.Func, error) {
		return reward.WithOverlong(f, reward.OverlongConfig{MaxLen: 100, Buffer: 50})
	})
	require.NoError(t, err)

	in := []reward.Input{
		{Prompt: "p", Response: `\boxed{1}`, ResponseTokens: 75},                   // group a
		{Prompt: "q", Response: "no box"},                                          // group b
		{Prompt: "p", Response: "no box either"},                                   // group a
		{Prompt: "p", Response: `so \boxed{2}`},                                    // group a
		{Prompt: "q", Response: `\boxed{1}`, ResponseTokens: 100},                  // group b
		{Prompt: "q", Response: `\boxed{2}`, ResponseTokens: 10, GroundTruth: "2"}, // group b
	}
	outs, err := reward.BatchGroups(context.Background(), shaped, in, []string{"a", "b", "a", "a", "b", "b"}, reward.BatchOptions{})
	require.NoError(t, err)
	// Each group sends its two boxed responses; the judge says 1 and 0.25.
	// score = judge − 0.5·len/100 + overlong, overlong = min(−(L−50)/50, 0):
	want := []float64{
		1 - 0.5*0.09 - 0.5,  // \boxed{1}, 9 bytes, 75 tokens: −25/50
		-1 - 0.5*0.06,       // gated: the rule's −1
		-1 - 0.5*0.13,       // gated
		0.25 - 0.5*0.12,     // so \boxed{2}, 12 bytes
		1 - 0.5*0.09 - 1,    // 100 tokens: −50/50
		0.25 - 0.5*0.09 - 0, // 10 tokens
	}
	for i, o := range outs {
		assert.InDelta(t, want[i], o.Score, 1e-12, "input %d: %s", i, o.Reason)
	}
	assert.Equal(t, 2, s.sent())
	for i := range 2 {
		assert.Contains(t, s.messages(t, i)[1].Content, `<response id="2">`)
		assert.NotContains(t, s.messages(t, i)[1].Content, "no box")
	}
	assert.Contains(t, outs[1].Reason, "judge: gate: format: want exactly one \\boxed answer, found 0")
}
