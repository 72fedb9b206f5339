package rollout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/tool"
)

// ErrConfig is wrapped by the errors of NewEngine for an invalid Config,
// and of Run for an invalid Request.
var ErrConfig = errors.New("rollout: invalid configuration")

// Tokenizer is what the engine needs from a tokenizer: policy/tokenizer's
// tokenizers satisfy it. Encode must encode special tokens written in the
// text (such as "<|im_start|>") as their ids, and Decode must keep them,
// so that tool-call tags and end-of-turn tokens are seen.
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// RenderFunc renders a conversation and the tools' schemas into prompt
// text, generation prompt included: for example a closure over
// policy/tokenizer's ApplyChatTemplate.
type RenderFunc func(messages []Message, tools []json.RawMessage) (string, error)

// Config configures an Engine. Zero values take the defaults given.
type Config struct {
	// Sampler generates the turns; required. Each trajectory calls it
	// from its own goroutine with one request per turn, so it should batch
	// concurrent calls itself, as policy.Model (continuous batching) and
	// inference servers do; wrap one that does not in a Batcher (Batch).
	Sampler lm.Sampler
	// Tokenizer encodes prompts and tool results and decodes turns;
	// required.
	Tokenizer Tokenizer
	// Env makes the environment of each trajectory (see Env): a game, a
	// user simulator, a session of a database, tools over state of the
	// episode's own. nil means the tool loop: a ToolEnv over the
	// request's tools with the limits below. With Env set, Tools,
	// MaxToolCalls, MaxCallsPerTurn, ToolTimeout and MaxConcurrentTools
	// must be zero (they configure that ToolEnv; an EnvFactory sets its
	// own), and requests name no Tools.
	Env EnvFactory
	// EnvTimeout bounds each call to an environment of Env (the factory,
	// Open, Step and Close); one that runs past it ends its trajectory
	// (StopEnvError, ErrEnvTimeout). 0 means DefaultEnvTimeout. The tool
	// loop of Env nil is bounded call by call by ToolTimeout instead.
	EnvTimeout time.Duration

	// Tools are the tools of requests that name none. The engine
	// dispatches calls through a tool.Registry of them, so each must have
	// a unique name and an OpenAI function schema naming it (NewEngine
	// fails otherwise), and a call whose arguments do not fit the tool's
	// parameters schema gets the registry's error result without reaching
	// the tool. A tool.Stateful tool (an MCP server's, say) gets a session
	// per trajectory through tool.Registry.OpenSessions: opened when the
	// trajectory starts, closed when it ends, however it ends.
	Tools []tool.Tool
	// Parser finds tool calls; nil means Hermes{}.
	Parser Parser
	// Format renders tool results, and an environment's observations;
	// nil means ChatML{} (Qwen). Observations with messages other than
	// tool results need a Format that is a MessageFormat.
	Format ResultFormat
	// Render renders Request.Messages; required only for such requests.
	Render RenderFunc

	// MaxTurns bounds the turns (Generate calls) of a trajectory; 0 means no
	// bound. MaxResponseTokens bounds the tokens after the prompt
	// (generated and tool results, as verl's response_length) and
	// MaxTotalTokens the whole sequence (the model's context); 0 means no
	// bound. At least one of the three must be set.
	MaxTurns          int
	MaxResponseTokens int
	MaxTotalTokens    int
	// MaxToolCalls bounds the calls of a trajectory and MaxCallsPerTurn
	// those of one turn; 0 means no bound. Calls beyond either are not
	// executed and get an error result (ErrTooManyCalls); a turn that
	// calls tools once MaxToolCalls are spent ends the trajectory.
	MaxToolCalls    int
	MaxCallsPerTurn int
	// ToolTimeout bounds each call; 0 leaves it to the tool.
	ToolTimeout time.Duration
	// MaxConcurrentTools bounds the calls running at once across all
	// trajectories (the sandbox's capacity); 0 means 16.
	MaxConcurrentTools int
	// MaxConcurrent bounds the trajectories in flight; 0 means 256.
	MaxConcurrent int
	// MaxResumes bounds how many times one turn is continued after its
	// sampler interrupted it (lm.FinishAbort: a weight update landed in
	// the middle of the turn; see "Partial rollouts" in the package
	// documentation); 0 means DefaultMaxResumes. A turn interrupted once
	// more fails its trajectory with an error wrapping ErrInterrupted.
	MaxResumes int
	// Batch, when not nil, puts a Batcher with this configuration in
	// front of Sampler for each Run. Leave it nil for policy.Model: the
	// model already admits each turn into its running batch, and a
	// Batcher would make a turn wait for the batch it joined to finish.
	Batch *BatchConfig
}

// Engine rolls out requests: it interleaves generation and the answers of
// an environment (tool calls by default) turn by turn and records
// token-faithful trajectories. Each trajectory runs in its own goroutine,
// so one waiting on a tool or an environment never holds up the others'
// decoding. An Engine is safe for concurrent use.
type Engine struct {
	cfg    Config
	reg    *tool.Registry      // Config.Tools
	slots  *semaphore.Weighted // tool-call slots of the tool loop
	prefix string              // session id prefix, unique per engine
	runs   atomic.Uint64
}

// NewEngine checks cfg and returns an Engine.
func NewEngine(cfg Config) (*Engine, error) {
	switch {
	case cfg.Sampler == nil:
		return nil, fmt.Errorf("%w: Sampler is nil", ErrConfig)
	case cfg.Tokenizer == nil:
		return nil, fmt.Errorf("%w: Tokenizer is nil", ErrConfig)
	case cfg.MaxTurns < 0 || cfg.MaxResponseTokens < 0 || cfg.MaxTotalTokens < 0 ||
		cfg.MaxToolCalls < 0 || cfg.MaxCallsPerTurn < 0 || cfg.ToolTimeout < 0 ||
		cfg.MaxConcurrentTools < 0 || cfg.MaxConcurrent < 0 || cfg.MaxResumes < 0:
		return nil, fmt.Errorf("%w: negative limit", ErrConfig)
	case cfg.MaxTurns == 0 && cfg.MaxResponseTokens == 0 && cfg.MaxTotalTokens == 0:
		return nil, fmt.Errorf("%w: one of MaxTurns, MaxResponseTokens and MaxTotalTokens must bound a trajectory", ErrConfig)
	case cfg.EnvTimeout < 0:
		return nil, fmt.Errorf("%w: negative EnvTimeout", ErrConfig)
	case cfg.Env != nil && (cfg.Tools != nil || cfg.MaxToolCalls != 0 || cfg.MaxCallsPerTurn != 0 || cfg.ToolTimeout != 0 || cfg.MaxConcurrentTools != 0):
		return nil, fmt.Errorf("%w: Env is set, so Tools, MaxToolCalls, MaxCallsPerTurn, ToolTimeout and MaxConcurrentTools must be zero (they configure the tool loop of Env nil; the environment offers its own tools)", ErrConfig)
	}
	reg, err := newRegistry(cfg.Tools)
	if err != nil {
		return nil, fmt.Errorf("%w: Tools: %w", ErrConfig, err)
	}
	if cfg.Parser == nil {
		cfg.Parser = Hermes{}
	}
	if cfg.Format == nil {
		cfg.Format = ChatML{}
	}
	if cfg.MaxConcurrentTools == 0 {
		cfg.MaxConcurrentTools = 16
	}
	if cfg.MaxResumes == 0 {
		cfg.MaxResumes = DefaultMaxResumes
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 256
	}
	if cfg.EnvTimeout == 0 {
		cfg.EnvTimeout = DefaultEnvTimeout
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("rollout: session id: %w", err)
	}
	return &Engine{
		cfg:    cfg,
		reg:    reg,
		slots:  semaphore.NewWeighted(int64(cfg.MaxConcurrentTools)),
		prefix: "rollout-" + hex.EncodeToString(id[:]),
	}, nil
}

// newRegistry returns a registry of tools, in order, naming the tool at
// fault when one is nil, shares another's name or has a bad schema.
func newRegistry(tools []tool.Tool) (*tool.Registry, error) {
	reg, err := tool.NewRegistry()
	if err != nil {
		return nil, err
	}
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("tool %d is nil", i)
		}
		if err := reg.Register(t); err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
	}
	return reg, nil
}

// MaxResponseTokens is the response budget the engine enforces on every
// trajectory (Config.MaxResponseTokens; 0 means none). It is the one
// source of truth for the budget: the trainer's overlong shaping reads it
// from here.
func (e *Engine) MaxResponseTokens() int { return e.cfg.MaxResponseTokens }

// job is one trajectory to roll out.
type job struct {
	req    *Request
	index  int
	sample int
	// prompt is the request's prompt as ids; nil when it is rendered
	// once the environment has opened (Config.Env with Messages or no
	// prompt).
	prompt  []int
	env     EnvFactory
	timeout time.Duration // bound of each call to env; 0: none
	params  lm.SampleParams
	session string
}

// Run rolls out every request N times and returns the trajectories in
// request order, the N samples of a request together. It fails on an
// invalid request before generating anything, and on the first sampler
// error; tool failures never fail it (they become error results), nor do
// environment failures (they end their own trajectory, StopEnvError).
// When ctx ends, every generation, tool and environment call in flight is
// abandoned and Run returns ctx's error.
func (e *Engine) Run(ctx context.Context, reqs []Request) ([]Trajectory, error) {
	var jobs []job
	run := e.runs.Add(1)
	for i := range reqs {
		js, err := e.prepare(&reqs[i], i, run)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, js...)
	}
	sampler := e.cfg.Sampler
	if e.cfg.Batch != nil {
		sampler = NewBatcher(sampler, *e.cfg.Batch)
	}
	closer, _ := e.cfg.Sampler.(lm.SessionCloser)

	out := make([]Trajectory, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.cfg.MaxConcurrent)
	launched := 0
	for i := range jobs {
		if gctx.Err() != nil {
			break
		}
		launched++
		g.Go(func() error {
			j := jobs[i]
			if closer != nil {
				defer closer.CloseSession(j.session)
			}
			t, err := e.rollout(gctx, sampler, &j)
			if err != nil {
				return fmt.Errorf("rollout: request %d (%q) sample %d: %w", j.index, j.req.ID, j.sample, err)
			}
			out[i] = t
			return nil
		})
	}
	err := g.Wait()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, err
	case launched < len(jobs): // ctx ended before every trajectory started
		return nil, context.Cause(ctx)
	}
	return out, nil
}

func (e *Engine) prepare(r *Request, index int, run uint64) ([]job, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: request %d (%q): %s", ErrConfig, index, r.ID, fmt.Sprintf(format, a...))
	}
	forms := 0
	for _, set := range []bool{len(r.Prompt) > 0, r.PromptText != "", len(r.Messages) > 0} {
		if set {
			forms++
		}
	}
	switch {
	case forms > 1 || forms == 0 && e.cfg.Env == nil:
		return nil, bad("set exactly one of Prompt, PromptText and Messages (%d set)", forms)
	case r.N < 0:
		return nil, bad("N is %d", r.N)
	case len(r.Messages) > 0 && e.cfg.Render == nil:
		return nil, bad("Messages given but Config.Render is nil")
	case r.Tools != nil && e.cfg.Env != nil:
		return nil, bad("Tools given but Config.Env is set: the environment offers the tools")
	}
	if err := lm.CheckSampleParams(r.Params); err != nil {
		return nil, bad("Params: %v", err)
	}
	reg := e.reg
	if r.Tools != nil {
		var err error
		if reg, err = newRegistry(r.Tools); err != nil {
			return nil, bad("Tools: %v", err)
		}
	}

	prompt := slices.Clone(r.Prompt)
	switch {
	case r.PromptText != "":
		prompt = e.cfg.Tokenizer.Encode(r.PromptText)
	case len(r.Messages) > 0 && e.cfg.Env == nil:
		text, err := e.cfg.Render(r.Messages, reg.Schemas())
		if err != nil {
			return nil, bad("render: %v", err)
		}
		prompt = e.cfg.Tokenizer.Encode(text)
	}
	if len(prompt) == 0 && (e.cfg.Env == nil || forms == 1 && len(r.Messages) == 0) {
		return nil, bad("empty prompt")
	}
	env, timeout := e.cfg.Env, e.cfg.EnvTimeout
	if env == nil {
		// The tool loop: a ToolEnv over the request's tools per
		// trajectory, bounded call by call by ToolTimeout.
		env, timeout = func(context.Context, Task) (Env, error) {
			return &ToolEnv{
				Tools: reg, MaxToolCalls: e.cfg.MaxToolCalls, MaxCallsPerTurn: e.cfg.MaxCallsPerTurn,
				Timeout: e.cfg.ToolTimeout, Slots: e.slots,
			}, nil
		}, 0
	}

	params := r.Params
	params.Stop = slices.Clone(params.Stop)
	for _, s := range e.cfg.Parser.StopStrings() {
		if !slices.Contains(params.Stop, s) {
			params.Stop = append(params.Stop, s)
		}
	}
	params.StopTokenIDs = slices.Clone(params.StopTokenIDs)
	params.Logprobs = true

	n := max(r.N, 1)
	jobs := make([]job, n)
	for s := range n {
		p := params
		if p.Seed != nil {
			// The same seed for every sample would make the N samples
			// identical; sample s uses seed+s.
			seed := *p.Seed + uint64(s)
			p.Seed = &seed
		}
		if len(prompt) == 0 {
			prompt = nil // rendered once the environment has opened
		}
		jobs[s] = job{
			req: r, index: index, sample: s, prompt: prompt, env: env, timeout: timeout, params: p,
			session: fmt.Sprintf("%s-%d-%d-%d", e.prefix, run, index, s),
		}
	}
	return jobs, nil
}

// budget returns the most tokens the next turn may generate (0: no bound)
// and the reason that would end the trajectory if it used them all;
// exhausted reports that not even one token fits.
func (e *Engine) budget(t *Trajectory, turnMax int) (limit int, reason StopReason, exhausted bool) {
	limit = math.MaxInt
	if turnMax > 0 {
		limit, reason = turnMax, StopTurnBudget
	}
	if m := e.cfg.MaxResponseTokens; m > 0 && m-t.ResponseLen() <= limit {
		limit, reason = m-t.ResponseLen(), StopResponseBudget
	}
	if m := e.cfg.MaxTotalTokens; m > 0 && m-len(t.Tokens) <= limit {
		limit, reason = m-len(t.Tokens), StopTotalBudget
	}
	if limit == math.MaxInt {
		return 0, StopTotalBudget, false
	}
	return limit, reason, limit <= 0
}

// fits reports whether n more tokens stay within the trajectory budgets,
// and which is exceeded if not.
func (e *Engine) fits(t *Trajectory, n int) (StopReason, bool) {
	if m := e.cfg.MaxTotalTokens; m > 0 && len(t.Tokens)+n > m {
		return StopTotalBudget, false
	}
	if m := e.cfg.MaxResponseTokens; m > 0 && t.ResponseLen()+n > m {
		return StopResponseBudget, false
	}
	return "", true
}

// rollout runs one trajectory: its environment is made and opened, then
// turns are generated and answered until the episode ends or a limit
// does, and the environment is closed, however the trajectory ended. It
// fails on a sampler error and when ctx ends; an environment's failure
// ends the trajectory (StopEnvError).
func (e *Engine) rollout(ctx context.Context, sampler lm.Sampler, j *job) (Trajectory, error) {
	start := time.Now()
	t := Trajectory{
		ID: j.req.ID, Request: j.index, Sample: j.sample,
		Tokens: slices.Clone(j.prompt), PromptLen: len(j.prompt),
	}
	task := j.req.Task
	task.ID, task.Request, task.Sample = j.req.ID, j.index, j.sample
	env, err := guarded(ctx, j.timeout, func(ctx context.Context) (Env, error) {
		env, err := j.env(ctx, task)
		if err == nil && env == nil {
			err = fmt.Errorf("%w: the factory returned no environment", ErrEnvOutput)
		}
		return env, err
	})
	if err == nil {
		err = e.episode(ctx, sampler, j, env, &t)
		e.closeEnv(ctx, j, env, &t)
	} else {
		err = e.envFailed(ctx, &t, "making the environment", err)
	}
	if err != nil {
		return Trajectory{}, err
	}
	t.Response = e.cfg.Tokenizer.Decode(t.Tokens[t.PromptLen:])
	t.Duration = time.Since(start)
	return t, nil
}

// closeEnv closes the trajectory's environment; an error of Close is
// recorded in t.EnvErr unless an earlier failure is.
func (e *Engine) closeEnv(ctx context.Context, j *job, env Env, t *Trajectory) {
	_, err := guarded(context.WithoutCancel(ctx), j.timeout, func(context.Context) (struct{}, error) {
		return struct{}{}, env.Close()
	})
	if err != nil && t.EnvErr == nil {
		t.EnvErr = envFailure("Close", err)
	}
}

// envFailed ends t for a failed environment call: ctx's error when the
// run is ending, else nil with t stopped as StopEnvError.
func (e *Engine) envFailed(ctx context.Context, t *Trajectory, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	t.Stop, t.EnvErr = StopEnvError, envFailure(what, err)
	if len(t.Mask) != len(t.Tokens) { // before the episode began: the prompt alone
		t.Mask = make([]float32, len(t.Tokens))
		t.LogProbs = make([]float32, len(t.Tokens))
		t.RawLogProbs = make([]float32, len(t.Tokens))
	}
	return nil
}

// promptFor is the trajectory's prompt: the request's, or rendered from
// the request's messages and the opening's.
func (e *Engine) promptFor(j *job, o Opening) ([]int, error) {
	if j.prompt != nil {
		if len(o.Messages) > 0 {
			return nil, fmt.Errorf("%w: the environment opens with messages, but the request's prompt is given as tokens or text", ErrEnvOutput)
		}
		return j.prompt, nil
	}
	msgs := append(slices.Clone(j.req.Messages), o.Messages...)
	switch {
	case len(msgs) == 0:
		return nil, fmt.Errorf("%w: neither the request nor the environment's opening gives a prompt", ErrEnvOutput)
	case e.cfg.Render == nil:
		return nil, fmt.Errorf("%w: the environment opens with messages, but Config.Render is nil", ErrEnvOutput)
	}
	text, err := e.cfg.Render(msgs, o.Tools)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	prompt := e.cfg.Tokenizer.Encode(text)
	if len(prompt) == 0 {
		return nil, fmt.Errorf("%w: the prompt encodes to no tokens", ErrEnvOutput)
	}
	return prompt, nil
}

// renderObservation is the text appended after a turn whose decoded text
// is turnText for an environment's observation: Config.Format's Render of
// the contents when every message is a tool result, else its
// RenderMessages.
func (e *Engine) renderObservation(turnText string, obs []Message) (string, error) {
	contents := make([]string, 0, len(obs))
	for _, m := range obs {
		if m.Role != "tool" {
			mf, ok := e.cfg.Format.(MessageFormat)
			if !ok {
				return "", fmt.Errorf("%w: the observation has a %q message, but Config.Format (%T) renders only tool results", ErrEnvOutput, m.Role, e.cfg.Format)
			}
			text, err := mf.RenderMessages(turnText, obs)
			if err != nil {
				return "", fmt.Errorf("%w: %w", ErrEnvOutput, err)
			}
			return text, nil
		}
		contents = append(contents, m.Content)
	}
	return e.cfg.Format.Render(turnText, contents), nil
}

// episode opens env and runs the trajectory's turns into t.
func (e *Engine) episode(ctx context.Context, sampler lm.Sampler, j *job, env Env, t *Trajectory) error {
	opening, err := guarded(ctx, j.timeout, env.Open)
	if err == nil {
		err = checkOpening(opening)
	}
	if err != nil {
		return e.envFailed(ctx, t, "Open", err)
	}
	t.Metadata = opening.Metadata
	prompt, err := e.promptFor(j, opening)
	if err != nil {
		return e.envFailed(ctx, t, "prompt", err)
	}
	t.Tokens, t.PromptLen = slices.Clone(prompt), len(prompt)
	t.Mask = make([]float32, len(prompt))
	logp := make([]float32, len(prompt))
	raw := make([]float32, len(prompt))
	haveLogp, haveRaw := true, true
	state := opening.State
	defer func() {
		if haveLogp {
			t.LogProbs = logp
		}
		if haveRaw {
			t.RawLogProbs = raw
		}
	}()

	for turn := 0; ; turn++ {
		limit, capReason, exhausted := e.budget(t, j.params.MaxNewTokens)
		if exhausted {
			t.Stop = capReason
			return nil
		}
		params := j.params
		params.MaxNewTokens = limit
		t0 := time.Now()
		g, segs, err := e.generateTurn(ctx, sampler, t.Tokens, params, j.session)
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn, err)
		}
		tr := Turn{
			Start: len(t.Tokens), End: len(t.Tokens) + len(g.Tokens),
			Finish: g.FinishReason, StopToken: g.StopToken, StopString: g.StopString,
			CachedTokens: g.CachedTokens, WeightVersion: g.WeightVersion, Latency: time.Since(t0),
			State: state,
		}
		for _, sg := range segs {
			sg.Start += tr.Start
			sg.End += tr.Start
			tr.Segments = append(tr.Segments, sg)
		}
		tr.ResultEnd = tr.End
		t.Tokens = append(t.Tokens, g.Tokens...)
		for i := range g.Tokens {
			t.Mask = append(t.Mask, 1)
			logp = append(logp, at(g.LogProbs, i))
			raw = append(raw, at(g.RawLogProbs, i))
		}
		haveLogp = haveLogp && (len(g.LogProbs) > 0 || len(g.Tokens) == 0)
		haveRaw = haveRaw && (len(g.RawLogProbs) > 0 || len(g.Tokens) == 0)
		tr.Text = e.cfg.Tokenizer.Decode(g.Tokens)
		t.Turns = append(t.Turns, tr)
		cur := &t.Turns[len(t.Turns)-1]

		if g.FinishReason == lm.FinishLength {
			t.Stop = capReason
			if limit == 0 || len(g.Tokens) < limit {
				t.Stop = StopTotalBudget // the model's context is full
			}
			return nil
		}
		final := e.cfg.MaxTurns > 0 && turn+1 >= e.cfg.MaxTurns
		a := Action{
			Turn: turn, Text: tr.Text, Tokens: g.Tokens[:len(g.Tokens):len(g.Tokens)],
			Calls: parseTurn(e.cfg.Parser, tr.Text, opening.Tools), Final: final,
		}
		fb, err := guarded(ctx, j.timeout, func(ctx context.Context) (Feedback, error) { return env.Step(ctx, a) })
		if err == nil {
			err = checkFeedback(fb)
		}
		if err != nil {
			return e.envFailed(ctx, t, fmt.Sprintf("Step of turn %d", turn), err)
		}
		if fb.Reward != nil {
			cur.Reward = new(*fb.Reward)
		}
		cur.Metadata = fb.Metadata
		for _, c := range fb.Calls {
			c.Turn = turn
			cur.Calls = append(cur.Calls, len(t.ToolCalls))
			t.ToolCalls = append(t.ToolCalls, c)
		}
		switch {
		case fb.Done:
			t.Stop = fb.Stop
			if t.Stop == "" {
				t.Stop = StopEnvDone
			}
			return nil
		case final:
			t.Stop = StopMaxTurns
			return nil
		}
		text, err := e.renderObservation(tr.Text, fb.Observation)
		if err != nil {
			return e.envFailed(ctx, t, fmt.Sprintf("observation of turn %d", turn), err)
		}
		glue := e.cfg.Tokenizer.Encode(text)
		if reason, ok := e.fits(t, len(glue)); !ok {
			t.Stop = reason
			return nil
		}
		t.Tokens = append(t.Tokens, glue...)
		for range glue {
			t.Mask = append(t.Mask, 0)
			logp = append(logp, 0)
			raw = append(raw, 0)
		}
		cur.ResultEnd = len(t.Tokens)
		state = fb.State
	}
}

// DefaultMaxResumes is Config.MaxResumes's default: the interruptions
// one turn survives.
const DefaultMaxResumes = 16

// ErrInterrupted is wrapped by the error of a trajectory whose turn its
// sampler interrupted more than Config.MaxResumes times.
var ErrInterrupted = errors.New("rollout: turn interrupted too often")

// generateTurn samples one turn after the tokens so far. A generation
// the sampler interrupts (lm.FinishAbort: a weight update) is continued
// from the prefix it reached, with the rest of the turn's token budget,
// until one ends; the turn's generation is the pieces joined, and segs
// say which tokens each piece holds (offsets within the turn) and the
// weight version that sampled them — nil for a turn sampled in one
// piece. A Stop string that spans a cut, which neither piece's sampler
// saw, ends the turn where an uninterrupted sampler would have.
func (e *Engine) generateTurn(ctx context.Context, sampler lm.Sampler, tokens []int, params lm.SampleParams, session string) (lm.Generation, []Segment, error) {
	limit := params.MaxNewTokens
	var joined lm.Generation
	var segs []Segment
	haveLogp, haveRaw := true, true
	prompt := tokens[:len(tokens):len(tokens)] // no spare capacity for the sampler to write into
	for resumes := 0; ; resumes++ {
		gens, err := sampler.Generate(ctx, []lm.GenerateRequest{{Prompt: prompt, Params: params, Session: session}})
		if err != nil {
			return lm.Generation{}, nil, fmt.Errorf("generate: %w", err)
		}
		if len(gens) != 1 {
			return lm.Generation{}, nil, fmt.Errorf("sampler returned %d generations for 1 request", len(gens))
		}
		g := gens[0]
		if err := checkGeneration(g, params.MaxNewTokens); err != nil {
			return lm.Generation{}, nil, err
		}
		if resumes == 0 {
			if g.FinishReason != lm.FinishAbort {
				return g, nil, nil // the common case: one piece
			}
			joined.CachedTokens = g.CachedTokens
		}
		start := len(joined.Tokens)
		joined.Tokens = append(joined.Tokens, g.Tokens...)
		haveLogp = haveLogp && (len(g.LogProbs) > 0 || len(g.Tokens) == 0)
		haveRaw = haveRaw && (len(g.RawLogProbs) > 0 || len(g.Tokens) == 0)
		joined.LogProbs = append(joined.LogProbs, g.LogProbs...)
		joined.RawLogProbs = append(joined.RawLogProbs, g.RawLogProbs...)
		if len(g.Tokens) > 0 {
			segs = append(segs, Segment{Start: start, End: len(joined.Tokens), WeightVersion: g.WeightVersion})
		}
		if len(segs) == 0 {
			// The turn's version is that of its first token; a turn
			// without tokens takes its last piece's.
			joined.WeightVersion = g.WeightVersion
		} else {
			joined.WeightVersion = segs[0].WeightVersion
		}
		joined.FinishReason, joined.StopToken, joined.StopString = g.FinishReason, g.StopToken, g.StopString
		if g.FinishReason != lm.FinishAbort {
			break
		}
		if limit > 0 && len(joined.Tokens) >= limit {
			joined.FinishReason = lm.FinishLength // cut at its last token
			break
		}
		if resumes == e.cfg.MaxResumes {
			return lm.Generation{}, nil, fmt.Errorf("%w: %d times (Config.MaxResumes %d)", ErrInterrupted, resumes+1, e.cfg.MaxResumes)
		}
		prompt = append(tokens[:len(tokens):len(tokens)], joined.Tokens...)
		prompt = prompt[:len(prompt):len(prompt)]
		if limit > 0 {
			params.MaxNewTokens = limit - len(joined.Tokens)
		}
	}
	if !haveLogp {
		joined.LogProbs = nil
	}
	if !haveRaw {
		joined.RawLogProbs = nil
	}
	e.stopAcrossCuts(&joined, tokens, params.Stop)
	for len(segs) > 0 && segs[len(segs)-1].Start >= len(joined.Tokens) {
		segs = segs[:len(segs)-1] // a stop string across a cut ended the turn earlier
	}
	if n := len(segs); n > 0 {
		segs[n-1].End = min(segs[n-1].End, len(joined.Tokens))
	}
	if len(segs) == 1 {
		segs = nil // one piece after all: its version is the turn's
	}
	return joined, segs, nil
}

// stopAcrossCuts ends g at the first of the stop strings that its
// decoded text contains, when that comes before where g ended: a string
// that spans the cut between two pieces of an interrupted turn.
func (e *Engine) stopAcrossCuts(g *lm.Generation, prompt []int, stop []string) {
	if len(stop) == 0 || len(g.Tokens) == 0 {
		return
	}
	c := lm.NewStopChecker(lm.SampleParams{Stop: stop}, nil)
	ts := lm.NewTextStream(e.cfg.Tokenizer.Decode, prompt)
	for i, id := range g.Tokens {
		st, end := c.Next(id, ts.Push(id))
		if !end {
			continue
		}
		if i == len(g.Tokens)-1 && g.FinishReason == lm.FinishStop {
			return // where the sampler itself stopped
		}
		g.Tokens = g.Tokens[:i+1]
		if g.LogProbs != nil {
			g.LogProbs = g.LogProbs[:i+1]
		}
		if g.RawLogProbs != nil {
			g.RawLogProbs = g.RawLogProbs[:i+1]
		}
		g.FinishReason, g.StopString, g.StopToken = lm.FinishStop, st.String, 0
		return
	}
}

func at(v []float32, i int) float32 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

// checkGeneration rejects a generation that breaks the Sampler contract.
func checkGeneration(g lm.Generation, limit int) error {
	switch {
	case limit > 0 && len(g.Tokens) > limit:
		return fmt.Errorf("sampler returned %d tokens, more than MaxNewTokens %d", len(g.Tokens), limit)
	case len(g.LogProbs) != 0 && len(g.LogProbs) != len(g.Tokens):
		return fmt.Errorf("sampler returned %d log-probs for %d tokens", len(g.LogProbs), len(g.Tokens))
	case len(g.RawLogProbs) != 0 && len(g.RawLogProbs) != len(g.Tokens):
		return fmt.Errorf("sampler returned %d raw log-probs for %d tokens", len(g.RawLogProbs), len(g.Tokens))
	}
	for i, lp := range g.LogProbs {
		if math.IsNaN(float64(lp)) || lp > 0 {
			return fmt.Errorf("sampler returned log-prob %g at token %d", lp, i)
		}
	}
	return nil
}
