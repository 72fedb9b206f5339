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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

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
	// Format renders tool results; nil means ChatML{} (Qwen).
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
	// Batch, when not nil, puts a Batcher with this configuration in
	// front of Sampler for each Run. Leave it nil for policy.Model: the
	// model already admits each turn into its running batch, and a
	// Batcher would make a turn wait for the batch it joined to finish.
	Batch *BatchConfig
}

// Engine rolls out requests: it interleaves generation and tool calls turn
// by turn and records token-faithful trajectories. Each trajectory runs in
// its own goroutine, so one waiting on a tool never holds up the others'
// decoding. An Engine is safe for concurrent use.
type Engine struct {
	cfg    Config
	reg    *tool.Registry // Config.Tools
	tools  chan struct{}  // tool-call slots
	prefix string         // session id prefix, unique per engine
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
		cfg.MaxConcurrentTools < 0 || cfg.MaxConcurrent < 0:
		return nil, fmt.Errorf("%w: negative limit", ErrConfig)
	case cfg.MaxTurns == 0 && cfg.MaxResponseTokens == 0 && cfg.MaxTotalTokens == 0:
		return nil, fmt.Errorf("%w: one of MaxTurns, MaxResponseTokens and MaxTotalTokens must bound a trajectory", ErrConfig)
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
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = 256
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("rollout: session id: %w", err)
	}
	return &Engine{
		cfg:    cfg,
		reg:    reg,
		tools:  make(chan struct{}, cfg.MaxConcurrentTools),
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
	req     *Request
	index   int
	sample  int
	prompt  []int
	tools   *tool.Registry
	params  lm.SampleParams
	session string
}

// Run rolls out every request N times and returns the trajectories in
// request order, the N samples of a request together. It fails on an
// invalid request before generating anything, and on the first sampler
// error; tool failures never fail it (they become error results). When
// ctx ends, every generation and tool call in flight is abandoned and Run
// returns ctx's error.
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
			// Stateful tools get a session of their own for this
			// trajectory, closed when it ends, whatever happened.
			var closeTools func() error
			j.tools, closeTools = j.tools.OpenSessions(gctx)
			defer closeTools()
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
	if forms != 1 {
		return nil, bad("set exactly one of Prompt, PromptText and Messages (%d set)", forms)
	}
	if r.N < 0 {
		return nil, bad("N is %d", r.N)
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
	case len(r.Messages) > 0:
		if e.cfg.Render == nil {
			return nil, bad("Messages given but Config.Render is nil")
		}
		text, err := e.cfg.Render(r.Messages, reg.Schemas())
		if err != nil {
			return nil, bad("render: %v", err)
		}
		prompt = e.cfg.Tokenizer.Encode(text)
	}
	if len(prompt) == 0 {
		return nil, bad("empty prompt")
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
		jobs[s] = job{
			req: r, index: index, sample: s, prompt: prompt, tools: reg, params: p,
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

func (e *Engine) rollout(ctx context.Context, sampler lm.Sampler, j *job) (Trajectory, error) {
	start := time.Now()
	t := Trajectory{
		ID: j.req.ID, Request: j.index, Sample: j.sample,
		Tokens:    slices.Clone(j.prompt),
		PromptLen: len(j.prompt),
		Mask:      make([]float32, len(j.prompt)),
	}
	logp := make([]float32, len(j.prompt))
	raw := make([]float32, len(j.prompt))
	haveLogp, haveRaw := true, true
	callsMade := 0

	for turn := 0; ; turn++ {
		limit, capReason, exhausted := e.budget(&t, j.params.MaxNewTokens)
		if exhausted {
			t.Stop = capReason
			break
		}
		params := j.params
		params.MaxNewTokens = limit
		t0 := time.Now()
		gens, err := sampler.Generate(ctx, []lm.GenerateRequest{{
			Prompt:  t.Tokens[:len(t.Tokens):len(t.Tokens)], // no spare capacity for the sampler to write into
			Params:  params,
			Session: j.session,
		}})
		if err != nil {
			return Trajectory{}, fmt.Errorf("turn %d: generate: %w", turn, err)
		}
		if len(gens) != 1 {
			return Trajectory{}, fmt.Errorf("turn %d: sampler returned %d generations for 1 request", turn, len(gens))
		}
		g := gens[0]
		if err := checkGeneration(g, limit); err != nil {
			return Trajectory{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		tr := Turn{
			Start: len(t.Tokens), End: len(t.Tokens) + len(g.Tokens),
			Finish: g.FinishReason, StopToken: g.StopToken, StopString: g.StopString,
			CachedTokens: g.CachedTokens, WeightVersion: g.WeightVersion, Latency: time.Since(t0),
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
			break
		}
		parsed := parseTurn(e.cfg.Parser, tr.Text, j.tools)
		if len(parsed) == 0 {
			t.Stop = StopNoToolCall
			break
		}
		if e.cfg.MaxTurns > 0 && turn+1 >= e.cfg.MaxTurns {
			t.Stop = StopMaxTurns
			break
		}
		quota := -1
		if e.cfg.MaxToolCalls > 0 {
			quota = e.cfg.MaxToolCalls - callsMade
			if quota <= 0 {
				t.Stop = StopMaxToolCalls
				break
			}
		}
		calls, counted, err := e.execute(ctx, j, turn, parsed, quota)
		if err != nil {
			return Trajectory{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		callsMade += counted
		contents := make([]string, len(calls))
		for i := range calls {
			contents[i] = calls[i].Result.Content
			cur.Calls = append(cur.Calls, len(t.ToolCalls))
			t.ToolCalls = append(t.ToolCalls, calls[i])
		}
		glue := e.cfg.Tokenizer.Encode(e.cfg.Format.Render(tr.Text, contents))
		if reason, ok := e.fits(&t, len(glue)); !ok {
			t.Stop = reason
			break
		}
		t.Tokens = append(t.Tokens, glue...)
		for range glue {
			t.Mask = append(t.Mask, 0)
			logp = append(logp, 0)
			raw = append(raw, 0)
		}
		cur.ResultEnd = len(t.Tokens)
	}
	if haveLogp {
		t.LogProbs = logp
	}
	if haveRaw {
		t.RawLogProbs = raw
	}
	t.Response = e.cfg.Tokenizer.Decode(t.Tokens[t.PromptLen:])
	t.Duration = time.Since(start)
	return t, nil
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

// execute runs a turn's calls concurrently and returns them with their
// results in call order, and how many count against MaxToolCalls. It
// fails only when ctx ends.
func (e *Engine) execute(ctx context.Context, j *job, turn int, parsed []ParsedCall, quota int) ([]ToolCall, int, error) {
	calls := make([]ToolCall, len(parsed))
	counted := 0
	var wg sync.WaitGroup
	for i, pc := range parsed {
		c := &calls[i]
		*c = ToolCall{Turn: turn, Name: pc.Name, Arguments: pc.Arguments, Raw: pc.Raw}
		switch {
		case pc.Err != nil:
			counted++
			c.Err = pc.Err
			c.Result = errorResult(modelText(pc.Err))
		case e.cfg.MaxCallsPerTurn > 0 && i >= e.cfg.MaxCallsPerTurn:
			c.Err = fmt.Errorf("%w: call %d of a turn, at most %d are executed", ErrTooManyCalls, i+1, e.cfg.MaxCallsPerTurn)
			c.Result = errorResult(fmt.Sprintf("not executed: at most %d tool calls per turn", e.cfg.MaxCallsPerTurn))
		case quota >= 0 && counted >= quota:
			c.Err = fmt.Errorf("%w: the trajectory's %d calls are spent", ErrTooManyCalls, e.cfg.MaxToolCalls)
			c.Result = errorResult(fmt.Sprintf("not executed: at most %d tool calls in all", e.cfg.MaxToolCalls))
		default:
			counted++
			// The registry checks the call before it takes a tool slot;
			// its error, without the package prefix, is what the model
			// reads, as tool.Registry.Call would show it.
			if _, err := j.tools.Validate(pc.Name, pc.Arguments); err != nil {
				c.Err = err
				if errors.Is(err, tool.ErrUnknownTool) {
					c.Err = fmt.Errorf("%w %q", ErrUnknownTool, pc.Name)
				}
				c.Result = errorResult(strings.TrimPrefix(err.Error(), "tool: "))
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.call(ctx, j.tools, c)
			}()
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	return calls, counted, nil
}

func errorResult(msg string) tool.Result {
	return tool.Result{Content: "Error: " + msg, Failed: true}
}

// modelText is err's text without the package prefix, for the model.
func modelText(err error) string {
	return strings.TrimPrefix(err.Error(), "rollout: ")
}

type callResult struct {
	res tool.Result
	err error
}

// call runs one tool call into c through reg. It waits for a tool slot,
// bounds the call by ToolTimeout and returns as soon as the call's context
// ends, even when the tool ignores it, and turns a panicking tool into an
// error result.
func (e *Engine) call(ctx context.Context, reg *tool.Registry, c *ToolCall) {
	select {
	case e.tools <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-e.tools }()
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if e.cfg.ToolTimeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, e.cfg.ToolTimeout)
	}
	defer cancel()
	start := time.Now()
	done := make(chan callResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- callResult{err: fmt.Errorf("tool panicked: %v", p)}
			}
		}()
		r, err := reg.Call(cctx, c.Name, c.Arguments)
		done <- callResult{r, err}
	}()
	var r callResult
	returned := false
	select {
	case r = <-done:
		returned = true
	case <-cctx.Done():
		r.err = cctx.Err()
	}
	c.Latency = time.Since(start)
	switch {
	case ctx.Err() != nil:
		// Run is ending; execute reports ctx's error.
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && (!returned || r.err != nil):
		c.Err = fmt.Errorf("%w after %v", ErrToolTimeout, e.cfg.ToolTimeout)
		c.Result = errorResult(fmt.Sprintf("tool %q timed out after %v", c.Name, e.cfg.ToolTimeout))
		c.Result.Duration = c.Latency
	case r.err != nil:
		c.Err = fmt.Errorf("%w: %q: %w", ErrToolFailed, c.Name, r.err)
		c.Result = errorResult(fmt.Sprintf("tool %q failed: %v", c.Name, r.err))
		c.Result.Duration = c.Latency
	default:
		c.Result = r.res
		if c.Result.Duration == 0 {
			c.Result.Duration = c.Latency
		}
	}
}
