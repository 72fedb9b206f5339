package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// Agent runs one episode of an agent program against the Recorder's
// endpoint: it points the program at ep.BaseURL (or sends ep.Session as
// the X-Session-Id header or the request's "user"), gives it the task
// in ep.Request, and returns when the episode is over. The program (or
// the Agent) may post the episode's reward to
// POST /v1/sessions/{id}/reward or Recorder.SetReward before returning;
// otherwise the trainer's reward function scores the trajectory.
type Agent func(ctx context.Context, ep Episode) error

// Episode is one run of an agent for one sample of a rollout request.
type Episode struct {
	// Session is the id the episode's calls are recorded under.
	Session string
	// BaseURL is SourceConfig.URL + "/sessions/" + Session + "/v1": an
	// OpenAI base URL that files every call under the session, for
	// programs that take only a base URL.
	BaseURL string
	// Request is the task: its Messages, PromptText or Prompt, its Tools
	// and its sampling Params (which the session's calls are sampled
	// with). Sample is which of its N samples this is.
	Request rollout.Request
	Sample  int
	// Seed is Request.Params.Seed + Sample when the request has a
	// seed, for the program's own randomness; 0 otherwise.
	Seed uint64
}

// SourceConfig configures a Source. Recorder and Agent are required.
type SourceConfig struct {
	// Recorder records the episodes' calls.
	Recorder *Recorder
	// URL is where the Recorder (or a serve.Server holding it) is
	// served, such as "http://127.0.0.1:8000"; Episode.BaseURL is made
	// of it. Empty leaves BaseURL empty.
	URL string
	// Agent runs an episode.
	Agent Agent
	// Concurrency bounds the episodes run at once; 0 means 8.
	Concurrency int
	// Timeout bounds each episode; 0 means none. An episode past it is
	// a failed one.
	Timeout time.Duration
	// FailScore is the score of a failed episode (see Source.Rollout).
	FailScore float64
}

// Source rolls out prompts by running an agent program once per sample
// and turning each episode's recorded calls into a trajectory: the
// trainer's rollout source for agents that are programs of their own
// (agentrl.TrainerParts.Source). It is safe for concurrent use.
type Source struct {
	cfg SourceConfig

	mu    sync.Mutex
	stats SourceStats
}

// SourceStats counts the episodes a Source has run.
type SourceStats struct {
	// Episodes is the number run, Failed those that failed (the agent
	// returned an error, ran past the timeout or made no call).
	Episodes, Failed int
	// Calls is the number of chat calls recorded in them; Reused and
	// Drifted count those whose prompt reused sampled tokens and those
	// where rendering the messages again would have drifted (Call).
	Calls, Reused, Drifted int
	// Rewritten is the number of episodes whose calls did not all
	// extend each other (the agent rewrote its history or asked for
	// several choices); DroppedCalls the calls outside the trajectory
	// kept, which the trainer does not see.
	Rewritten, DroppedCalls int
	// Posted is the number of episodes whose reward was posted.
	Posted int
}

// NewSource returns a Source for cfg.
func NewSource(cfg SourceConfig) (*Source, error) {
	switch {
	case cfg.Recorder == nil:
		return nil, fmt.Errorf("%w: SourceConfig.Recorder is nil", ErrConfig)
	case cfg.Agent == nil:
		return nil, fmt.Errorf("%w: SourceConfig.Agent is nil", ErrConfig)
	case cfg.Concurrency < 0:
		return nil, fmt.Errorf("%w: SourceConfig.Concurrency %d is negative", ErrConfig, cfg.Concurrency)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: SourceConfig.Timeout %v is negative", ErrConfig, cfg.Timeout)
	}
	if err := checkFinite(cfg.FailScore); err != nil {
		return nil, fmt.Errorf("%w: SourceConfig.FailScore: %w", ErrConfig, err)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 8
	}
	cfg.URL = strings.TrimSuffix(cfg.URL, "/")
	return &Source{cfg: cfg}, nil
}

// Stats returns the Source's counts.
func (s *Source) Stats() SourceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Rollout runs N episodes of every request (Request.N; 0 means 1), each
// in a session of its own opened with the request's sampling Params
// and returns one trajectory per episode, request-major as
// rollout.Engine.Run orders them (ID the request's, Request and Sample
// set), with the reward each episode posted (nil where none was). The
// calls of sample k of a request with a seed sample with seeds derived
// from Params.Seed + k (Episode.Seed), one per call.
//
// An episode whose calls do not all extend each other (its agent
// rewrote its history, or asked for n > 1 choices) gives its end, the
// last of Trajectories with Split, which its reward judges; the other
// calls are dropped and counted (SourceStats.DroppedCalls). An episode that
// fails — the agent returns an error, runs past the timeout, or makes
// no call — gives what it recorded (or, with no call, the request's
// prompt and an empty response) with the reward FailScore and a reason
// that says why, unless the agent posted one; the batch goes on. Only
// ctx ending fails the rollout.
func (s *Source) Rollout(ctx context.Context, reqs []rollout.Request) ([]rollout.Trajectory, []*reward.Output, error) {
	type job struct{ req, sample int }
	var jobs []job
	for i, rq := range reqs {
		n := rq.N
		if n < 0 {
			return nil, nil, fmt.Errorf("record: request %d (%q): N %d is negative", i, rq.ID, n)
		}
		for k := range max(n, 1) {
			jobs = append(jobs, job{i, k})
		}
	}
	trajs := make([]rollout.Trajectory, len(jobs))
	rewards := make([]*reward.Output, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.Concurrency)
	for j, jb := range jobs {
		g.Go(func() error {
			tr, rw, err := s.episode(gctx, reqs[jb.req], jb.sample)
			if err != nil {
				return err
			}
			tr.ID, tr.Request, tr.Sample = reqs[jb.req].ID, jb.req, jb.sample
			trajs[j], rewards[j] = tr, rw
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return trajs, rewards, nil
}

// episode runs one episode and converts it.
func (s *Source) episode(ctx context.Context, rq rollout.Request, sample int) (rollout.Trajectory, *reward.Output, error) {
	rec := s.cfg.Recorder
	id := NewSessionID()
	params := rq.Params
	var seed uint64
	if params.Seed != nil {
		seed = *params.Seed + uint64(sample)
		// Calls k of samples s and s+1 would share seeds if the call
		// index were added to consecutive seeds; spread the samples.
		spread := seed * 0x9E3779B97F4A7C15
		params.Seed = &spread
	}
	if err := rec.Open(id, SessionOptions{Params: &params}); err != nil {
		return rollout.Trajectory{}, nil, err
	}
	ep := Episode{Session: id, Request: rq, Sample: sample, Seed: seed}
	if s.cfg.URL != "" {
		ep.BaseURL = s.cfg.URL + "/sessions/" + id + "/v1"
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if s.cfg.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, s.cfg.Timeout)
	}
	agentErr := runAgent(actx, s.cfg.Agent, ep)
	cancel()
	sess, _ := rec.Take(id)
	if ctx.Err() != nil {
		return rollout.Trajectory{}, nil, ctx.Err()
	}
	st := SourceStats{Episodes: 1, Calls: len(sess.Calls)}
	for _, c := range sess.Calls {
		if c.Reused >= 0 {
			st.Reused++
		}
		if c.Drift {
			st.Drifted++
		}
	}
	posted := sess.Reward
	fail := func(why string) *reward.Output {
		st.Failed++
		if posted != nil {
			return posted
		}
		return &reward.Output{Score: s.cfg.FailScore, Reason: "agent failed: " + why}
	}
	var tr rollout.Trajectory
	rw := posted
	switch {
	case len(sess.Calls) == 0:
		why := "it made no chat call"
		if agentErr != nil {
			why = agentErr.Error()
		}
		prompt, err := rec.promptOf(rq)
		if err != nil {
			return rollout.Trajectory{}, nil, fmt.Errorf("record: request %q: %w", rq.ID, err)
		}
		tr = rollout.Trajectory{Tokens: prompt, PromptLen: len(prompt), Mask: make([]float32, len(prompt)),
			LogProbs: make([]float32, len(prompt)), Stop: StopAgentFailed}
		rw = fail(why)
	default:
		segs, err := rec.Trajectories(sess, Split)
		if err != nil {
			return rollout.Trajectory{}, nil, err
		}
		tr = segs[len(segs)-1]
		if len(segs) > 1 {
			st.Rewritten++
			st.DroppedCalls = len(sess.Calls) - len(tr.Turns)
		}
		if agentErr != nil {
			tr.Stop = StopAgentFailed
			rw = fail(agentErr.Error())
		}
	}
	if posted != nil {
		st.Posted++
	}
	s.mu.Lock()
	s.stats.add(st)
	s.mu.Unlock()
	return tr, rw, nil
}

// StopAgentFailed: the episode's agent failed (an error, the timeout,
// no call at all).
const StopAgentFailed rollout.StopReason = "agent_failed"

// runAgent runs the agent, turning a panic into an error.
func runAgent(ctx context.Context, a Agent, ep Episode) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("agent panicked: %v", r)
		}
	}()
	err = a(ctx, ep)
	if err == nil && ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("episode ran past its timeout: %w", ctx.Err())
	}
	return err
}

func (a *SourceStats) add(b SourceStats) {
	a.Episodes += b.Episodes
	a.Failed += b.Failed
	a.Calls += b.Calls
	a.Reused += b.Reused
	a.Drifted += b.Drifted
	a.Rewritten += b.Rewritten
	a.DroppedCalls += b.DroppedCalls
	a.Posted += b.Posted
}

// promptOf is the prompt tokens of a rollout request: its token ids,
// its text encoded, or its messages rendered with the template and the
// tools' schemas, generation prompt included.
func (r *Recorder) promptOf(rq rollout.Request) ([]int, error) {
	switch {
	case rq.Prompt != nil:
		return rq.Prompt, nil
	case rq.PromptText != "":
		return r.cfg.Tokenizer.Encode(rq.PromptText), nil
	case rq.Messages != nil:
		msgs := make([]tokenizer.Message, len(rq.Messages))
		for i, m := range rq.Messages {
			msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
		}
		var tools []json.RawMessage
		for _, t := range rq.Tools {
			tools = append(tools, t.Schema())
		}
		text, err := r.render(msgs, tools, nil, true)
		if err != nil {
			return nil, err
		}
		return r.cfg.Tokenizer.Encode(text), nil
	}
	return nil, errors.New("the request has no prompt")
}
