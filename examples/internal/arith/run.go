package arith

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// Defaults of the RL stage and its evaluation: examples/arith's flag
// defaults, which examples/ablation shares, so that an ablation's
// baseline is the main job's RL stage.
const (
	DefaultRLSteps      = 120  // GRPO-TCR steps (-rl-steps)
	DefaultPrompts      = 8    // prompts per step (-prompts)
	DefaultN            = 8    // samples per prompt, in RL and evaluation (-n)
	DefaultMiniBatch    = 32   // trajectories per update: 2 updates per step of 64 (-mini-batch)
	DefaultRLLR         = 2e-4 // RL learning rate (-rl-lr)
	DefaultMaxResponse  = 128  // response budget in tokens (-max-response)
	DefaultEvalProblems = 128  // held-out problems (-eval); 32 before 2026-11-29, whose avg@8 has a standard error of 3–4.5 points
	DefaultTemperature  = 1.0  // sampling temperature (-temperature)
	// DefaultEvalSeed draws the held-out problems (-eval-seed): one set
	// for every training seed, so that runs of different seeds, and the
	// variants of an ablation, are compared on the same problems.
	DefaultEvalSeed uint64 = 1001
)

// CheckEvalSeed reports an error when the held-out problems drawn from
// evalSeed would be training problems of a run with the given seed: the
// SFT problems are drawn from seed and the RL prompts from seed+1.
func CheckEvalSeed(seed, evalSeed uint64) error {
	switch evalSeed {
	case seed:
		return fmt.Errorf("-eval-seed %d is -seed %d, which draws the SFT problems: the held-out set would be trained on", evalSeed, seed)
	case seed + 1:
		return fmt.Errorf("-eval-seed %d is -seed %d + 1, which draws the RL prompts: the held-out set would be trained on", evalSeed, seed)
	}
	return nil
}

// MaxToolCalls bounds the tool calls of a trajectory in EngineConfig.
const MaxToolCalls = 3

// RLOptions are the settings of the RL stage that its configuration
// depends on; examples/arith's flags of the same names set them.
type RLOptions struct {
	Prompts     int     // prompts per step (-prompts)
	N           int     // samples per prompt (-n)
	MiniBatch   int     // trajectories per update, at most the step's batch; 0: the whole batch (-mini-batch)
	Temperature float64 // sampling temperature (-temperature)
	MaxResponse int     // response budget in tokens, tool results included (-max-response)
	LR          float64 // learning rate (-rl-lr)
	Seed        uint64  // rollout seeds and mini-batch shuffles (-seed)
	LoRARank    int     // > 0: train LoRA adapters of this rank on every projection instead of the full weights (-lora-rank)
	LoRAAlpha   float64 // the adapters' lora_alpha; 0 means the rank (-lora-alpha)
}

// RLConfig is GRPO-TCR scaled down to the tiny model: 8 samples per
// prompt, a short response budget with its overlong buffer, the step's
// batch cut into mini-batches of o.MiniBatch trajectories (2 updates per
// step by default, so that the second is off-policy and the clip acts)
// and a learning rate for a few million parameters.
func RLConfig(o RLOptions) agentrl.TrainerConfig {
	c := agentrl.GRPOTCR()
	c.PromptsPerStep = o.Prompts
	c.SamplesPerPrompt = o.N
	c.MiniBatchSize = c.PromptsPerStep * c.SamplesPerPrompt
	if o.MiniBatch > 0 {
		// At most the whole batch: a small run (-prompts 2 -n 4) makes
		// one update per step rather than failing.
		c.MiniBatchSize = min(o.MiniBatch, c.MiniBatchSize)
	}
	c.MicroBatchSize = min(c.MiniBatchSize, 32)
	c.Sampling = lm.SampleParams{Temperature: o.Temperature, TopP: 1, TopK: -1, MaxNewTokens: o.MaxResponse}
	c.Overlong = &reward.OverlongConfig{Buffer: o.MaxResponse / 4, Factor: 1}
	// The batch was just sampled by this very model: the sampler's
	// log-probabilities are the old policy's (the same kernels and
	// weights), so recomputing them would only repeat a forward pass.
	// Every mini-batch after the first is trained by an updated policy,
	// so its ratio to them moves off 1 and the clip acts.
	c.OldLogProbs = agentrl.OldLogProbsRollout
	c.Optimizer.LR = o.LR
	c.Optimizer.WeightDecay = 0
	c.Seed = o.Seed
	if o.LoRARank > 0 {
		c.LoRA = &policy.LoRAConfig{Rank: o.LoRARank, Alpha: o.LoRAAlpha, TargetModules: []string{policy.LoRAAllLinear}}
	}
	return c
}

// EngineConfig is the rollout engine of the RL stage and its
// evaluations: sampler s, the tool tl, at most 4 turns, MaxToolCalls
// tool calls (one per turn) and maxResponse tokens after the prompt.
func EngineConfig(s lm.Sampler, tok rollout.Tokenizer, tl tool.Tool, maxResponse int) rollout.Config {
	return rollout.Config{
		Sampler: s, Tokenizer: tok, Tools: []tool.Tool{tl},
		MaxTurns: 4, MaxResponseTokens: maxResponse, MaxToolCalls: MaxToolCalls, MaxCallsPerTurn: 1,
		ToolTimeout: 10 * time.Second, MaxConcurrentTools: 8,
	}
}

// NewEngine is rollout.NewEngine(EngineConfig(s, tok, tl, maxResponse)).
func NewEngine(s lm.Sampler, tok rollout.Tokenizer, tl tool.Tool, maxResponse int) (*rollout.Engine, error) {
	return rollout.NewEngine(EngineConfig(s, tok, tl, maxResponse))
}

// NewReward is the task's reward: +1 for a correct \boxed{} answer, −1
// otherwise (reward.MathFunc, strict extraction), before shaping.
func NewReward() (reward.Func, error) {
	return reward.MathFunc(reward.MathConfig{Correct: 1, Wrong: -1, Strict: true})
}

// Prompts are the training prompts of problems: their chat prompt text
// and answer, data source "arith".
func Prompts(probs []Problem, s ToolSpec) []agentrl.Prompt {
	prompts := make([]agentrl.Prompt, len(probs))
	for i, p := range probs {
		prompts[i] = agentrl.Prompt{ID: p.ID, Text: PromptText(p, s), GroundTruth: strconv.FormatInt(p.Answer, 10), DataSource: "arith"}
	}
	return prompts
}

// LoadModel loads a model saved by examples/arith (a run's sft-model or
// model folder) with the task's decoder and sampler seed and opts (the
// device's policy.WithBackend), and checks that its vocabulary is the
// byte tokenizer's.
func LoadModel(dir string, tok *tokenizer.Bytes, seed uint64, opts ...policy.ModelOption) (*policy.Model, error) {
	m, err := policy.Load(dir, append([]policy.ModelOption{policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(seed)}, opts...)...)
	if err != nil {
		return nil, err
	}
	if v := m.Config().VocabSize; v != tok.VocabSize() {
		m.Close()
		return nil, fmt.Errorf("%s: vocabulary of %d tokens, the task's byte tokenizer has %d", dir, v, tok.VocabSize())
	}
	return m, nil
}

// OpenTool starts the tool a -tool flag names: "code_interpreter" (the
// Python sandbox), "calculator", or "auto", the interpreter when python3
// exists and the calculator otherwise, which it says on stderr. The
// returned function closes the tool.
func OpenTool(name string, stderr io.Writer) (tool.Tool, func(), error) {
	nop := func() {}
	switch name {
	case "calculator":
		return &tool.Calculator{}, nop, nil
	case "code_interpreter", "auto":
		ci, err := tool.NewCodeInterpreter(tool.SandboxConfig{Workers: 2, Timeout: 10 * time.Second})
		if errors.Is(err, tool.ErrNoPython) && name == "auto" {
			fmt.Fprintln(stderr, "notice: python3 not found; using the calculator tool instead of the code interpreter")
			return &tool.Calculator{}, nop, nil
		}
		if err != nil {
			return nil, nop, fmt.Errorf("code interpreter: %w", err)
		}
		return ci, func() { _ = ci.Close() }, nil
	default:
		return nil, nop, fmt.Errorf("-tool %q: want auto, code_interpreter or calculator", name)
	}
}

// ToolCacheFlag registers -tool-cache on fs, into size, for
// examples/arith and examples/ablation: the results CacheTool keeps,
// tool.DefaultCacheSize unless set; a negative or non-integer value is a
// usage error.
func ToolCacheFlag(fs *flag.FlagSet, size *int) {
	*size = tool.DefaultCacheSize
	usage := fmt.Sprintf("tool results kept and given again to identical calls (tool.Cache): a GRPO group's samples mostly make the same call, and a sandboxed execution costs tens of CPU-milliseconds; the task's calls print an integer expression, a function of the code; 0 runs every call (default %d)", tool.DefaultCacheSize)
	fs.Func("tool-cache", usage, func(s string) error {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return fmt.Errorf("%q: want ≥ 0 (0: no cache)", s)
		}
		*size = v
		return nil
	})
}

// CacheTool wraps t in a tool.Cache of size results, or returns t and a
// nil cache when size is 0. The task's tool calls print an integer
// expression, whose output is a function of the code, so a kept result
// is what running the call again would print.
func CacheTool(t tool.Tool, size int) (tool.Tool, *tool.Cache, error) {
	if size == 0 {
		return t, nil, nil
	}
	c, err := tool.NewCache(t, tool.CacheConfig{Size: size})
	if err != nil {
		return nil, nil, fmt.Errorf("-tool-cache: %w", err)
	}
	return c, c, nil
}

// CacheSummary is a line saying how c served its tool's calls.
func CacheSummary(c *tool.Cache) string {
	st := c.Stats()
	return fmt.Sprintf("%s: %d calls, %d run, %d answered by an identical call (%d kept, %d in flight)",
		c.Name(), st.Calls, st.Executed, st.Hits+st.Shared, st.Hits, st.Shared)
}

// SFT learning-rate schedules (SFTOptions.Schedule, examples/arith's
// -sft-schedule).
const (
	ScheduleCosine = "cosine" // linear warm-up, then cosine decay to a tenth of the peak
	ScheduleWSD    = "wsd"    // linear warm-up, the peak held, then cosine decay to a tenth over the last DecayFrac of the updates
)

// SFTOptions are the settings of the SFT stage (examples/arith's -sft-*
// flags). The zero values of Schedule and WarmupFrac are cosine decay
// after a 5% warm-up.
type SFTOptions struct {
	Steps, Batch int     // updates, and sequences per update
	LR           float64 // peak learning rate
	Schedule     string  // ScheduleCosine ("" too) or ScheduleWSD
	WarmupFrac   float64 // fraction of Steps warming up linearly; 0 means 0.05
	DecayFrac    float64 // with ScheduleWSD: fraction of Steps decaying at the end; 0 means 0.2
	Seed         uint64  // shuffling
	// ToolFirst is the fraction of Steps, at the start, whose batches
	// hold only trajectories that call the tool (those Tool marks),
	// before the data's usual mix (SFTOrder); 0 draws the data's
	// shuffled epochs throughout.
	ToolFirst float64
	// Tool marks the data's trajectories that call the tool
	// (SFTToolUse, PairSFT); required when ToolFirst > 0 or Pairs.
	Tool []bool
	// Pairs trains the data as PairSFT lays it out, trajectories 2i and
	// 2i+1 problem i with and without the tool: each update draws
	// Batch problems as the trainer would draw them from the problems
	// alone (shuffled passes with Seed), and trains the first half of
	// them with the tool and the rest with a guess (Batch must be
	// even). Every batch then holds as many of each kind, and which kind
	// a problem is trained as changes from pass to pass.
	Pairs bool
}

// toolFirstSteps is the number of updates o.ToolFirst makes of o.Steps.
func (o SFTOptions) toolFirstSteps() int {
	return int(math.Round(o.ToolFirst * float64(o.Steps)))
}

// toolSeed salts the order of the tool-only batches away from that of
// the whole data.
const toolSeed = 0x746f6f6c // "tool"

// SFTOrder is the order in which RunSFT trains on n trajectories of
// which those tool marks call the tool, with o.ToolFirst > 0 or o.Pairs:
// o.Steps batches of o.Batch indices. The first round(ToolFirst·Steps)
// are shuffled passes over the tool-calling trajectories alone; the rest
// are the batches the SFT trainer draws from the whole data by itself,
// from its first (its shuffled epochs with o.Seed, the last short batch
// of each dropped), so that they hold the usual share of guesses, or
// with o.Pairs, the trainer's batches over the n/2 problems, the first
// half of each batch's problems as their tool call (2i) and the rest as
// their guess (2i+1).
func SFTOrder(tool []bool, o SFTOptions) ([][]int, error) {
	k := o.toolFirstSteps()
	var pool []int
	for i, t := range tool {
		if t {
			pool = append(pool, i)
		}
	}
	switch {
	case !(o.ToolFirst >= 0 && o.ToolFirst < 1):
		return nil, fmt.Errorf("SFT tool-first fraction %g: want within [0, 1)", o.ToolFirst)
	case o.Batch < 1 || o.Batch > len(tool):
		return nil, fmt.Errorf("SFT batch %d: want within [1, %d], the trajectories", o.Batch, len(tool))
	case k > 0 && len(pool) < o.Batch:
		return nil, fmt.Errorf("SFT tool-first batches of %d: only %d trajectories call the tool", o.Batch, len(pool))
	case o.Pairs && (o.Batch%2 != 0 || len(tool)%2 != 0):
		return nil, fmt.Errorf("SFT pairs: batch %d and %d trajectories: want both even", o.Batch, len(tool))
	case o.Pairs && o.Batch > len(tool)/2:
		return nil, fmt.Errorf("SFT pairs: batch %d: want at most %d, the problems", o.Batch, len(tool)/2)
	}
	first, err := passes(pool, o.Batch, k, o.Seed^toolSeed)
	if err != nil {
		return nil, err
	}
	if !o.Pairs {
		rest, err := passes(indices(len(tool)), o.Batch, o.Steps-k, o.Seed)
		if err != nil {
			return nil, err
		}
		return append(first, rest...), nil
	}
	problems, err := passes(indices(len(tool)/2), o.Batch, o.Steps-k, o.Seed)
	if err != nil {
		return nil, err
	}
	for _, b := range problems {
		// The sampler shuffled the batch, so its first half is a random
		// half of its problems.
		for j, p := range b {
			b[j] = 2 * p
			if j >= len(b)/2 {
				b[j]++
			}
		}
		first = append(first, b)
	}
	return first, nil
}

// indices is 0, 1, …, n-1.
func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// passes is count batches of size from pool, as the SFT trainer draws
// its data: a dataset.Sampler over pool, shuffled with seed epoch after
// epoch, each epoch's last short batch dropped.
func passes(pool []int, size, count int, seed uint64) ([][]int, error) {
	if count == 0 {
		return nil, nil
	}
	s, err := dataset.NewSampler(len(pool), dataset.SamplerConfig{BatchSize: size, Seed: seed, Shuffle: true, DropLast: true})
	if err != nil {
		return nil, err
	}
	out := make([][]int, count)
	for b := range out {
		batch := s.Next()
		for i, p := range batch {
			batch[i] = pool[p]
		}
		out[b] = batch
	}
	return out, nil
}

// schedule is the learning-rate schedule o describes.
func (o SFTOptions) schedule() (policy.Schedule, error) {
	w := int64(max(o.Steps/20, 1)) // 5%, as before the fraction was a setting
	if o.WarmupFrac > 0 {
		w = int64(max(math.Round(o.WarmupFrac*float64(o.Steps)), 1))
	}
	switch o.Schedule {
	case "", ScheduleCosine:
		return policy.CosineSchedule{WarmupSteps: w, TotalSteps: int64(o.Steps), MinLRRatio: 0.1}, nil
	case ScheduleWSD:
		decay := o.DecayFrac
		if decay == 0 {
			decay = 0.2
		}
		return policy.WSDSchedule{WarmupSteps: w, DecaySteps: int64(math.Round(decay * float64(o.Steps))), TotalSteps: int64(o.Steps), MinLRRatio: 0.1}, nil
	default:
		return nil, fmt.Errorf("SFT schedule %q: want %s or %s", o.Schedule, ScheduleCosine, ScheduleWSD)
	}
}

// RunSFT fine-tunes model on data for o.Steps updates of o.Batch
// sequences (AdamW, weight decay 0.01, o's learning-rate schedule,
// gradients clipped to norm 1), logging each update to
// dir/sft_metrics.jsonl and the progress to stderr, and reports the loss
// per trained token on the first 256 sequences afterwards. With
// o.ToolFirst or o.Pairs it trains on the data in SFTOrder's order.
func RunSFT(ctx context.Context, model *policy.Model, data []agentrl.SFTSample, o SFTOptions, dir string, dp agentrl.DataParallel, stderr io.Writer) error {
	if o.Steps == 0 {
		return nil
	}
	sched, err := o.schedule()
	if err != nil {
		return err
	}
	train, inOrder := data, false
	if o.ToolFirst != 0 || o.Pairs {
		// The trainer draws the curriculum or the pairs in order: data
		// laid out batch by batch as SFTOrder says, one epoch of exactly
		// o.Steps updates.
		if len(o.Tool) != len(data) {
			return fmt.Errorf("SFT order: %d trajectories marked, want the %d of the data", len(o.Tool), len(data))
		}
		order, err := SFTOrder(o.Tool, o)
		if err != nil {
			return err
		}
		train, inOrder = make([]agentrl.SFTSample, 0, o.Steps*o.Batch), true
		for _, b := range order {
			for _, i := range b {
				train = append(train, data[i])
			}
		}
	}
	per := max(len(train)/o.Batch, 1)
	epochs := (o.Steps + per - 1) / per
	opt := policy.DefaultAdamWConfig()
	opt.LR = o.LR
	opt.WeightDecay = 0.01
	// Copying digits from the prompt (an induction-head circuit) appears
	// only after a plateau of loss ≈ 1.1 whose length varies from seed to
	// seed (500–1000 updates of examples/arith's 2000); the rate must stay
	// high while the model is on it (ScheduleWSD), and a lower peak (2e-3
	// rather than 3e-3) left the plateau sooner on most seeds, 5e-3 later.
	opt.Schedule = sched
	log, err := metrics.Open(filepath.Join(dir, "sft_metrics.jsonl"), metrics.Options{})
	if err != nil {
		return err
	}
	defer log.Close()
	tr, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{
		BatchSize: o.Batch, Epochs: epochs, Optimizer: opt, MaxGradNorm: 1, Seed: o.Seed, InOrder: inOrder,
	}, agentrl.SFTParts{Policy: model, Data: train, Metrics: log, DataParallel: dp})
	if err != nil {
		return err
	}
	if err := tr.Run(ctx, agentrl.RunConfig{
		Steps:    o.Steps,
		Recorder: progress.New(progress.Config{Out: stderr, Description: "sft", Interval: 10 * time.Second}),
	}); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	loss, err := tr.Loss(ctx, data[:min(len(data), 256)])
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sft: %d updates, loss per trained token %.4f\n", o.Steps, loss)
	return nil
}
