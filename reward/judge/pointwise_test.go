package judge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/reward"
)

var sample = reward.Input{Prompt: "What is 6·7?", GroundTruth: "42", Response: "6·7 = 42, so the answer is 42."}

func pointwise(t *testing.T, j *Judge, c PointwiseConfig) reward.Func {
	t.Helper()
	if c.Rubric == "" {
		c.Rubric = "Full marks for the right number, none otherwise."
	}
	f, err := j.Pointwise(c)
	require.NoError(t, err)
	return f
}

func newJudge(t *testing.T, cfg Config) *Judge {
	t.Helper()
	j, err := New(cfg)
	require.NoError(t, err)
	return j
}

func TestPointwiseRequestAndVerdict(t *testing.T) {
	t.Setenv("JUDGE_TEST_KEY", "sk-test-123")
	t.Setenv("OPENAI_API_KEY", "must-not-be-sent")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/must-not-be-used")
	s := newScripted(t, step{reply: "The product is right.\n<score>8</score>"})
	cfg := fast(s.url())
	cfg.APIKeyEnv, cfg.MaxTokens, cfg.Temperature = "JUDGE_TEST_KEY", 256, 0.5
	j := newJudge(t, cfg)
	f := pointwise(t, j, PointwiseConfig{Rubric: "Full marks for 42.", PassScore: 0.8})

	out, err := f(context.Background(), sample)
	require.NoError(t, err)
	assert.InDelta(t, 0.8, out.Score, 1e-12) // 8 on a scale of 10
	assert.True(t, out.Acc, "0.8 reaches PassScore 0.8")
	assert.Equal(t, "judge: 8/10: The product is right.", out.Reason)

	require.Equal(t, 1, s.sent())
	assert.Equal(t, "/v1/chat/completions", s.paths[0])
	assert.Equal(t, "Bearer sk-test-123", s.headers[0].Get("Authorization"))
	body := s.request(0)
	assert.Equal(t, "judge-model", body["model"])
	assert.EqualValues(t, 256, body["max_completion_tokens"])
	assert.EqualValues(t, 0.5, body["temperature"])
	msgs := s.messages(t, 0)
	require.Len(t, msgs, 2)
	assert.Equal(t, "system", msgs[0].Role)
	assert.Contains(t, msgs[0].Content, "Full marks for 42.")
	assert.Contains(t, msgs[0].Content, "<score>N</score>")
	assert.Equal(t, "user", msgs[1].Role)
	assert.Equal(t, "<task>\nWhat is 6·7?\n</task>\n\n<reference>\n42\n</reference>\n\n<response>\n6·7 = 42, so the answer is 42.\n</response>", msgs[1].Content)

	st := j.Stats()
	assert.Equal(t, int64(1), st.Requests)
	assert.Equal(t, int64(1), st.Verdicts)
	assert.Equal(t, int64(11), st.PromptTokens)
	assert.Equal(t, int64(7), st.CompletionTokens)
	assert.Positive(t, st.LatencyMax)
	assert.Equal(t, st.LatencyMax, st.LatencyMean(), "one request: the mean is the max")
}

func TestNoKeyWithoutAPIKeyEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "must-not-be-sent")
	s := newScripted(t, step{reply: "<score>10</score>"})
	f := pointwise(t, newJudge(t, fast(s.url())), PointwiseConfig{})
	_, err := f(context.Background(), sample)
	require.NoError(t, err)
	assert.Empty(t, s.headers[0].Get("Authorization"))
}

// TestPointwiseFaults drives the judge through the scripted faults: each
// gives the defined score and the counted metric.
func TestPointwiseFaults(t *testing.T) {
	const fallback = -0.5
	cases := []struct {
		name  string
		steps []step
		cfg   func(*Config)
		pc    PointwiseConfig
		score float64
		// reason is a part of the Reason.
		reason string
		want   Stats
	}{
		{
			name:  "malformed then good",
			steps: []step{{reply: "I think it is fine."}, {reply: "<score>6</score>"}},
			score: 0.6, reason: "judge: 6/10",
			want: Stats{Requests: 2, Malformed: 1, Verdicts: 1},
		},
		{
			name:  "always malformed",
			steps: []step{{reply: "Score: 9"}},
			pc:    PointwiseConfig{Reasks: 2, Fallback: fallback},
			score: fallback, reason: "judge: no verdict (3 malformed replies, the last: malformed verdict: no <score>N</score> tag); fallback score -0.5",
			want: Stats{Requests: 3, Malformed: 3, Fallbacks: 1},
		},
		{
			name:  "out of range, no re-asks",
			steps: []step{{reply: "<score>11</score>"}},
			pc:    PointwiseConfig{Reasks: -1, Fallback: fallback},
			score: fallback, reason: "score 11 is outside 0 to 10",
			want: Stats{Requests: 1, Malformed: 1, Fallbacks: 1},
		},
		{
			name:  "5xx then good",
			steps: []step{{status: 500}, {status: 503}, {reply: "<score>10</score>"}},
			score: 1, reason: "judge: 10/10",
			want: Stats{Requests: 3, Retries: 2, Verdicts: 1},
		},
		{
			name:  "always 5xx",
			steps: []step{{status: 502}},
			cfg:   func(c *Config) { c.Retries = 2 },
			pc:    PointwiseConfig{Fallback: fallback},
			score: fallback, reason: "judge failed: after 3 attempt(s)",
			want: Stats{Requests: 3, Retries: 2, Failures: 1, Fallbacks: 1},
		},
		{
			name:  "connection reset then good",
			steps: []step{{reset: true}, {reply: "<score>3</score>"}},
			score: 0.3, reason: "judge: 3/10",
			want: Stats{Requests: 2, Retries: 1, Verdicts: 1},
		},
		{
			name:  "garbage body then good",
			steps: []step{{body: "{not json"}, {reply: "<score>4</score>"}},
			score: 0.4, reason: "judge: 4/10",
			want: Stats{Requests: 2, Retries: 1, Verdicts: 1},
		},
		{
			name:  "no choices, always",
			steps: []step{{body: `{"id": "x", "object": "chat.completion", "choices": []}`}},
			cfg:   func(c *Config) { c.Retries = -1 },
			pc:    PointwiseConfig{Fallback: fallback},
			score: fallback, reason: "response has no choices",
			want: Stats{Requests: 1, Failures: 1, Fallbacks: 1},
		},
		{
			name:  "slow past the deadline",
			steps: []step{{delay: time.Minute}},
			cfg:   func(c *Config) { c.Timeout, c.Retries = 30*time.Millisecond, 1 },
			pc:    PointwiseConfig{Fallback: fallback},
			score: fallback, reason: "request timed out after 30ms",
			want: Stats{Requests: 2, Retries: 1, Timeouts: 2, Failures: 1, Fallbacks: 1},
		},
		{
			name:  "slow once, then good",
			steps: []step{{delay: time.Minute}, {reply: "<score>5</score>"}},
			cfg:   func(c *Config) { c.Timeout = 30 * time.Millisecond },
			score: 0.5, reason: "judge: 5/10",
			want: Stats{Requests: 2, Retries: 1, Timeouts: 1, Verdicts: 1},
		},
		{
			name:  "400 is not retried",
			steps: []step{{status: 400}, {reply: "<score>10</score>"}},
			pc:    PointwiseConfig{Fallback: fallback},
			score: fallback, reason: "after 1 attempt(s)",
			want: Stats{Requests: 1, Failures: 1, Fallbacks: 1},
		},
		{
			name:  "render fails",
			steps: []step{{reply: "<score>10</score>"}},
			cfg: func(c *Config) {
				c.Render = func([]Message) (string, error) { return "", errors.New("no chat template") }
			},
			pc:    PointwiseConfig{Fallback: fallback},
			score: fallback, reason: "judge failed: after 1 attempt(s): render: no chat template",
			want: Stats{Failures: 1, Fallbacks: 1},
		},
		{
			name:  "completions",
			steps: []step{{reply: "<score>2</score>"}},
			cfg: func(c *Config) {
				c.Render = func(m []Message) (string, error) { return m[0].Content + "\n" + m[1].Content, nil }
			},
			score: 0.2, reason: "judge: 2/10",
			want: Stats{Requests: 1, Verdicts: 1},
		},
		{
			name:  "thinking, then the verdict",
			steps: []step{{reply: "<think>maybe <score>1</score>?</think>It is right. <score>9.5</score>"}},
			score: 0.95, reason: "judge: 9.5/10: It is right.",
			want: Stats{Requests: 1, Verdicts: 1},
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
			f := pointwise(t, j, c.pc)
			start := time.Now()
			out, err := f(context.Background(), sample)
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 10*time.Second, "no stall")
			assert.InDelta(t, c.score, out.Score, 1e-12)
			assert.Contains(t, out.Reason, c.reason)
			got := j.Stats()
			assert.Equal(t, c.want.Requests, got.Requests, "requests")
			assert.Equal(t, c.want.Retries, got.Retries, "retries")
			assert.Equal(t, c.want.Timeouts, got.Timeouts, "timeouts")
			assert.Equal(t, c.want.Failures, got.Failures, "failures")
			assert.Equal(t, c.want.Malformed, got.Malformed, "malformed")
			assert.Equal(t, c.want.Verdicts, got.Verdicts, "verdicts")
			assert.Equal(t, c.want.Fallbacks, got.Fallbacks, "fallbacks")
			assert.Equal(t, c.want.Requests, int64(s.sent()), "requests the server saw")
			if c.want.Failures+c.want.Malformed > 0 {
				assert.NotEmpty(t, got.LastError)
			}
		})
	}
}

// TestReaskShowsTheReply checks the re-ask: the malformed reply and what
// was wrong with it go back to the judge, so that a greedy judge is not
// asked the same question twice.
func TestReaskShowsTheReply(t *testing.T) {
	s := newScripted(t, step{reply: "Looks right: 10 points"}, step{reply: "<score>10</score>"})
	f := pointwise(t, newJudge(t, fast(s.url())), PointwiseConfig{})
	_, err := f(context.Background(), sample)
	require.NoError(t, err)
	first, second := s.messages(t, 0), s.messages(t, 1)
	require.Len(t, second, 4)
	assert.Equal(t, first, second[:2])
	assert.Equal(t, Message{Role: "assistant", Content: "Looks right: 10 points"}, second[2])
	assert.Equal(t, "user", second[3].Role)
	assert.Contains(t, second[3].Content, "no <score>N</score> tag")
}

func TestRetryAfterIsHonoured(t *testing.T) {
	s := newScripted(t, step{status: 429, header: map[string]string{"Retry-After-Ms": "150"}}, step{reply: "<score>7</score>"})
	cfg := fast(s.url())
	cfg.BackoffMax = time.Second
	f := pointwise(t, newJudge(t, cfg), PointwiseConfig{})
	start := time.Now()
	out, err := f(context.Background(), sample)
	require.NoError(t, err)
	assert.InDelta(t, 0.7, out.Score, 1e-12)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

func TestCache(t *testing.T) {
	s := newScripted(t, step{reply: "<score>9</score>"})
	j := newJudge(t, fast(s.url()))
	f := pointwise(t, j, PointwiseConfig{})
	for range 3 {
		out, err := f(context.Background(), sample)
		require.NoError(t, err)
		assert.InDelta(t, 0.9, out.Score, 1e-12)
	}
	assert.Equal(t, 1, s.sent())
	assert.Equal(t, int64(2), j.Stats().CacheHits)

	// Another response, reference, task or rubric is another question.
	other := sample
	other.Response = "43"
	_, err := f(context.Background(), other)
	require.NoError(t, err)
	other = sample
	other.GroundTruth = "41"
	_, err = f(context.Background(), other)
	require.NoError(t, err)
	other = sample
	other.Prompt = "What is 7·6?"
	_, err = f(context.Background(), other)
	require.NoError(t, err)
	g := pointwise(t, j, PointwiseConfig{Rubric: "Another rubric."})
	_, err = g(context.Background(), sample)
	require.NoError(t, err)
	assert.Equal(t, 5, s.sent())

	// A verdict that did not come is not cached.
	s2 := newScripted(t, step{status: 500}, step{reply: "<score>2</score>"})
	cfg := fast(s2.url())
	cfg.Retries = -1
	j2 := newJudge(t, cfg)
	h := pointwise(t, j2, PointwiseConfig{Fallback: -1})
	out, err := h(context.Background(), sample)
	require.NoError(t, err)
	assert.Equal(t, -1.0, out.Score)
	out, err = h(context.Background(), sample)
	require.NoError(t, err)
	assert.InDelta(t, 0.2, out.Score, 1e-12)

	// Off: every call asks.
	s3 := newScripted(t, step{reply: "<score>9</score>"})
	cfg = fast(s3.url())
	cfg.CacheSize = -1
	k := pointwise(t, newJudge(t, cfg), PointwiseConfig{})
	for range 2 {
		_, err := k(context.Background(), sample)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, s3.sent())
}

// TestIdenticalQuestionsInFlight: identical responses judged at once
// share one request.
func TestIdenticalQuestionsInFlight(t *testing.T) {
	s := newScripted(t, step{reply: "<score>9</score>", delay: 200 * time.Millisecond})
	j := newJudge(t, fast(s.url()))
	f := pointwise(t, j, PointwiseConfig{})
	const n = 6
	var wg sync.WaitGroup
	scores := make([]float64, n)
	for i := range n {
		wg.Go(func() {
			out, err := f(context.Background(), sample)
			assert.NoError(t, err)
			scores[i] = out.Score
		})
	}
	wg.Wait()
	for _, sc := range scores {
		assert.InDelta(t, 0.9, sc, 1e-12)
	}
	assert.Equal(t, 1, s.sent())
	st := j.Stats()
	assert.Equal(t, int64(n-1), st.Shared+st.CacheHits)
}

// TestLeaderLeaves: when the caller whose request the others wait on
// leaves, a waiting caller asks on its own and gets its verdict.
func TestLeaderLeaves(t *testing.T) {
	s := newScripted(t, step{reply: "<score>9</score>", delay: 300 * time.Millisecond}, step{reply: "<score>8</score>"})
	j := newJudge(t, fast(s.url()))
	f := pointwise(t, j, PointwiseConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() {
		_, err := f(ctx, sample)
		leaderDone <- err
	}()
	require.Eventually(t, func() bool { return s.sent() == 1 }, 5*time.Second, time.Millisecond)
	follower := make(chan reward.Output, 1)
	go func() {
		out, err := f(context.Background(), sample)
		assert.NoError(t, err)
		follower <- out
	}()
	time.Sleep(50 * time.Millisecond) // the follower joins the flight
	cancel()
	require.ErrorIs(t, <-leaderDone, context.Canceled)
	out := <-follower
	assert.InDelta(t, 0.8, out.Score, 1e-12, "the follower's own request")
	assert.Equal(t, int64(0), j.Stats().Fallbacks)
}

func TestConcurrencyBound(t *testing.T) {
	s := newScripted(t, step{reply: "<score>5</score>", delay: 30 * time.Millisecond})
	cfg := fast(s.url())
	cfg.Concurrency = 2
	f := pointwise(t, newJudge(t, cfg), PointwiseConfig{})
	inputs := make([]reward.Input, 8)
	for i := range inputs {
		inputs[i] = sample
		inputs[i].Response = fmt.Sprint("answer ", i)
	}
	outs, err := reward.Batch(context.Background(), f, inputs, reward.BatchOptions{Limit: 8})
	require.NoError(t, err)
	for _, o := range outs {
		assert.InDelta(t, 0.5, o.Score, 1e-12)
	}
	assert.Equal(t, 8, s.sent())
	assert.Equal(t, int32(2), s.peak.Load())
}

// TestCallerCancels: the caller's context ending is an error, not a
// fallback: the batch was cancelled, the judge did not fail.
func TestCallerCancels(t *testing.T) {
	s := newScripted(t, step{reply: "<score>5</score>", delay: time.Minute})
	j := newJudge(t, fast(s.url()))
	f := pointwise(t, j, PointwiseConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := f(ctx, sample)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	st := j.Stats()
	assert.Zero(t, st.Fallbacks+st.Failures+st.Timeouts)

	// Under reward.Batch, the item's deadline is the batch's timeout verdict.
	outs, err := reward.Batch(context.Background(), f, []reward.Input{sample}, reward.BatchOptions{ItemTimeout: 50 * time.Millisecond, TimeoutScore: -2})
	require.NoError(t, err)
	assert.Equal(t, -2.0, outs[0].Score)
}

// TestBatchWithFaults: a batch over a judge that fails in every way ends
// with a defined score for every item.
func TestBatchWithFaults(t *testing.T) {
	s := newScripted(t, step{status: 500}, step{reset: true}, step{reply: "nonsense"}, step{delay: time.Minute}, step{reply: "<score>10</score>"})
	cfg := fast(s.url())
	cfg.Timeout, cfg.Retries, cfg.Concurrency = 50*time.Millisecond, -1, 1
	j := newJudge(t, cfg)
	f := pointwise(t, j, PointwiseConfig{Reasks: -1, Fallback: -1})
	inputs := make([]reward.Input, 5)
	for i := range inputs {
		inputs[i] = sample
		inputs[i].Response = fmt.Sprint("answer ", i)
	}
	outs, err := reward.Batch(context.Background(), f, inputs, reward.BatchOptions{Limit: 1})
	require.NoError(t, err)
	scores := make([]float64, len(outs))
	for i, o := range outs {
		scores[i] = o.Score
	}
	assert.Equal(t, []float64{-1, -1, -1, -1, 1}, scores)
	st := j.Stats()
	assert.Equal(t, int64(4), st.Fallbacks)
	assert.Equal(t, int64(3), st.Failures) // 500, reset, timeout
	assert.Equal(t, int64(1), st.Malformed)
	assert.Equal(t, int64(1), st.Timeouts)
}

func TestTakeStats(t *testing.T) {
	s := newScripted(t, step{reply: "<score>5</score>"})
	j := newJudge(t, fast(s.url()))
	f := pointwise(t, j, PointwiseConfig{})
	_, err := f(context.Background(), sample)
	require.NoError(t, err)
	w := j.TakeStats()
	assert.Equal(t, int64(1), w.Requests)
	other := sample
	other.Response = "42"
	_, err = f(context.Background(), other)
	require.NoError(t, err)
	_, err = f(context.Background(), other)
	require.NoError(t, err)
	w = j.TakeStats()
	assert.Equal(t, int64(1), w.Requests)
	assert.Equal(t, int64(1), w.CacheHits)
	assert.Equal(t, int64(2), j.Stats().Requests, "Stats counts the whole life")
	m := w.Metrics("judge/")
	assert.Equal(t, 1.0, m["judge/requests"])
	assert.Equal(t, 1.0, m["judge/cache_hits"])
	assert.Equal(t, 11.0, m["judge/prompt_tokens"])
	assert.Len(t, m, 13)
	assert.Zero(t, j.TakeStats().Requests)
}

func TestCheck(t *testing.T) {
	s := newScripted(t, step{reply: "OK"})
	require.NoError(t, newJudge(t, fast(s.url())).Check(context.Background()))
	bad := newScripted(t, step{status: http.StatusNotFound})
	err := newJudge(t, fast(bad.url())).Check(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
	assert.Equal(t, 1, bad.sent(), "no retries")
}

func TestConfigErrors(t *testing.T) {
	for name, c := range map[string]Config{
		"no URL":          {Model: "m"},
		"no scheme":       {BaseURL: "localhost:8000/v1", Model: "m"},
		"ftp":             {BaseURL: "ftp://host/v1", Model: "m"},
		"no model":        {BaseURL: "http://host/v1"},
		"key env unset":   {BaseURL: "http://host/v1", Model: "m", APIKeyEnv: "JUDGE_TEST_UNSET_KEY"},
		"negative":        {BaseURL: "http://host/v1", Model: "m", Concurrency: -1},
		"temperature":     {BaseURL: "http://host/v1", Model: "m", Temperature: -1},
		"backoff max<min": {BaseURL: "http://host/v1", Model: "m", BackoffBase: time.Second, BackoffMax: time.Millisecond},
	} {
		_, err := New(c)
		assert.ErrorIs(t, err, ErrConfig, name)
	}
	j := newJudge(t, Config{BaseURL: "http://host/v1", Model: "m", Render: func([]Message) (string, error) { return "", nil }})
	for name, c := range map[string]PointwiseConfig{
		"no rubric":      {},
		"negative scale": {Rubric: "r", MaxScore: -1},
		"pass above 1":   {Rubric: "r", PassScore: 2},
		"fallback NaN":   {Rubric: "r", Fallback: math.NaN()},
	} {
		_, err := j.Pointwise(c)
		assert.ErrorIs(t, err, ErrConfig, name)
	}
	_, err := j.Ranking(RankingConfig{JSONSchema: true})
	assert.ErrorIs(t, err, ErrConfig, "a schema needs the chat API")
	_, err = j.Ranking(RankingConfig{PassScore: -0.5})
	assert.ErrorIs(t, err, ErrConfig)
}

// TestBackoff checks the wait before each retry: equal jitter within
// [b/2, b] for b = min(max, base·2^k), the same draws for the same seed,
// raised to Retry-After but never past the maximum.
func TestBackoff(t *testing.T) {
	cfg := Config{BaseURL: "http://host/v1", Model: "m", BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second, Seed: 7}
	a, b := newJudge(t, cfg), newJudge(t, cfg)
	for k := range 70 {
		ceil := time.Second
		if k < 4 {
			ceil = 100 * time.Millisecond << k // 100, 200, 400, 800 ms
		}
		d := a.backoff(k, 0)
		assert.GreaterOrEqual(t, d, ceil/2, "retry %d", k)
		assert.LessOrEqual(t, d, ceil, "retry %d", k)
		assert.Equal(t, d, b.backoff(k, 0), "same seed, same draws")
	}
	assert.Equal(t, 900*time.Millisecond, a.backoff(0, 900*time.Millisecond), "Retry-After above the draw")
	assert.Equal(t, time.Second, a.backoff(0, time.Hour), "capped at BackoffMax")
	cfg.Seed = 8
	c := newJudge(t, cfg)
	differ := false
	for k := range 10 {
		differ = differ || a.backoff(k, 0) != c.backoff(k, 0)
	}
	assert.True(t, differ, "another seed, other draws")
}

func TestCompletionsRequest(t *testing.T) {
	s := newScripted(t, step{reply: " <score>4</score>"})
	cfg := fast(s.url())
	cfg.Render = func(m []Message) (string, error) {
		return fmt.Sprintf("[%s]%s[%s]%s", m[0].Role, m[0].Content, m[1].Role, m[1].Content), nil
	}
	cfg.MaxTokens, cfg.Stop = 64, []string{"<|im_end|>"}
	f := pointwise(t, newJudge(t, cfg), PointwiseConfig{Rubric: "R."})
	out, err := f(context.Background(), sample)
	require.NoError(t, err)
	assert.InDelta(t, 0.4, out.Score, 1e-12)
	assert.Equal(t, "/v1/completions", s.paths[0])
	body := s.request(0)
	assert.Equal(t, "[system]"+pointwiseSystem("R.", 10)+"[user]"+pointwiseUser(sample.Prompt, sample.GroundTruth, sample.Response), body["prompt"])
	assert.EqualValues(t, 64, body["max_tokens"])
	assert.Equal(t, []any{"<|im_end|>"}, body["stop"])
	assert.Equal(t, "judge-model", body["model"])
}
