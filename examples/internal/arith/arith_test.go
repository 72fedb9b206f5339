package arith

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/advantage"
	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/tool"
)

// RLConfig is GRPOTCR with the task's batch, budget and optimiser: the
// mini-batch is the step's whole batch (prompts × n) unless set, the
// micro-batch at most 32, the overlong buffer a quarter of the budget.
func TestRLConfig(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		o                           RLOptions
		wantMini, wantMicro, buffer int
	}{
		{"whole batch", RLOptions{Prompts: DefaultPrompts, N: DefaultN, MiniBatch: 0, Temperature: 1, MaxResponse: 128, LR: 2e-4, Seed: 1},
			64, 32, 32}, // 8 × 8 = 64; min(64, 32); 128 / 4
		{"defaults", RLOptions{Prompts: DefaultPrompts, N: DefaultN, MiniBatch: DefaultMiniBatch, Temperature: 1, MaxResponse: 128, LR: DefaultRLLR, Seed: 1},
			32, 32, 32}, // two updates of 32 per step of 64; min(32, 32); 128 / 4
		{"mini-batches of 16", RLOptions{Prompts: 8, N: 8, MiniBatch: 16, Temperature: 1, MaxResponse: 64, LR: 2e-4, Seed: 3},
			16, 16, 16}, // min(16, 32); 64 / 4
		{"tiny", RLOptions{Prompts: 2, N: 4, Temperature: 0.7, MaxResponse: 64, LR: 1e-3, Seed: 9},
			8, 8, 16},
		{"default mini-batch above a tiny batch", RLOptions{Prompts: 2, N: 4, MiniBatch: DefaultMiniBatch, Temperature: 1, MaxResponse: 64, LR: 1e-3, Seed: 9},
			8, 8, 16}, // min(32, 2 × 4)
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := RLConfig(tc.o)
			require.NoError(t, c.Validate())
			assert.Equal(t, tc.o.Prompts, c.PromptsPerStep)
			assert.Equal(t, tc.o.N, c.SamplesPerPrompt)
			assert.Equal(t, tc.wantMini, c.MiniBatchSize)
			assert.Equal(t, tc.wantMicro, c.MicroBatchSize)
			require.NotNil(t, c.Overlong)
			assert.Equal(t, tc.buffer, c.Overlong.Buffer)
			assert.Zero(t, c.Overlong.MaxLen, "the budget comes from the engine")
			assert.Equal(t, lm.SampleParams{Temperature: tc.o.Temperature, TopP: 1, TopK: -1, MaxNewTokens: tc.o.MaxResponse}, c.Sampling)
			assert.Equal(t, agentrl.OldLogProbsRollout, c.OldLogProbs)
			assert.Equal(t, tc.o.LR, c.Optimizer.LR)
			assert.Zero(t, c.Optimizer.WeightDecay)
			assert.Equal(t, tc.o.Seed, c.Seed)
			// GRPO-TCR's objective, untouched.
			assert.Equal(t, loss.Config{Mode: loss.ModeVanilla, Agg: loss.AggTokenMean, ClipLow: 0.2, ClipHigh: 0.28, ClipC: 10}, c.Loss)
			assert.Equal(t, advantage.GRPO, c.Advantage.Estimator)
		})
	}
}

// The SFT schedule: the zero options are the cosine decay after a 5%
// warm-up the stage always had; WSD holds the peak until its decay.
func TestSFTSchedule(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    SFTOptions
		want policy.Schedule
	}{
		{"zero: cosine, 5% warm-up", SFTOptions{Steps: 2000},
			policy.CosineSchedule{WarmupSteps: 100, TotalSteps: 2000, MinLRRatio: 0.1}},
		{"tiny: one warm-up step", SFTOptions{Steps: 3, Schedule: ScheduleCosine},
			policy.CosineSchedule{WarmupSteps: 1, TotalSteps: 3, MinLRRatio: 0.1}},
		{"cosine, 10% warm-up", SFTOptions{Steps: 1000, Schedule: ScheduleCosine, WarmupFrac: 0.1},
			policy.CosineSchedule{WarmupSteps: 100, TotalSteps: 1000, MinLRRatio: 0.1}},
		{"wsd, default decay", SFTOptions{Steps: 2000, Schedule: ScheduleWSD},
			policy.WSDSchedule{WarmupSteps: 100, DecaySteps: 400, TotalSteps: 2000, MinLRRatio: 0.1}},
		{"wsd, 30% decay", SFTOptions{Steps: 2000, Schedule: ScheduleWSD, WarmupFrac: 0.05, DecayFrac: 0.3},
			policy.WSDSchedule{WarmupSteps: 100, DecaySteps: 600, TotalSteps: 2000, MinLRRatio: 0.1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.schedule()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := SFTOptions{Steps: 10, Schedule: "linear"}.schedule()
	assert.ErrorContains(t, err, `SFT schedule "linear"`)
}

func TestEngineConfig(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	calc := &tool.Calculator{}
	c := EngineConfig(nil, tok, calc, 96)
	assert.Equal(t, 4, c.MaxTurns)
	assert.Equal(t, 96, c.MaxResponseTokens)
	assert.Equal(t, 3, c.MaxToolCalls)
	assert.Equal(t, 1, c.MaxCallsPerTurn)
	assert.Equal(t, []tool.Tool{calc}, c.Tools)
	_, err = NewEngine(nil, tok, calc, 96)
	assert.Error(t, err, "an engine needs a sampler")
}

func TestPrompts(t *testing.T) {
	spec := SpecFor(&tool.Calculator{})
	probs := GenerateProblems(2, 3, "rl")
	ps := Prompts(probs, spec)
	require.Len(t, ps, 3)
	for i, p := range ps {
		assert.Equal(t, agentrl.Prompt{ID: "rl-" + strconv.Itoa(i), Text: PromptText(probs[i], spec),
			GroundTruth: strconv.FormatInt(probs[i].Answer, 10), DataSource: "arith"}, p)
	}
	assert.Equal(t, "<|im_start|>user\n"+probs[0].Text+"<|im_end|>\n<|im_start|>assistant\n", ps[0].Text)
}

func TestOpenTool(t *testing.T) {
	tl, closeTool, err := OpenTool("calculator", &bytes.Buffer{})
	require.NoError(t, err)
	defer closeTool()
	assert.Equal(t, "calculator", tl.Name())
	_, _, err = OpenTool("abacus", &bytes.Buffer{})
	assert.EqualError(t, err, `-tool "abacus": want auto, code_interpreter or calculator`)
}

// tinyModel saves a 1-layer Qwen3-style model with the given vocabulary
// size in a temporary folder.
func tinyModel(t *testing.T, vocab int) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"model_type": "qwen3", "vocab_size": vocab, "hidden_size": 16, "intermediate_size": 32,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
		"max_position_embeddings": 64, "rope_theta": 10000, "tie_word_embeddings": true, "torch_dtype": "float32",
	})
	require.NoError(t, err)
	cfg, err := policy.ParseConfig(raw)
	require.NoError(t, err)
	m, err := policy.New(cfg, 1)
	require.NoError(t, err)
	defer m.Close()
	dir := filepath.Join(t.TempDir(), "model")
	require.NoError(t, m.Save(dir, lm.SaveOptions{}))
	return dir
}

func TestLoadModel(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	m, err := LoadModel(tinyModel(t, tok.VocabSize()), tok, 1)
	require.NoError(t, err)
	assert.Equal(t, tok.VocabSize(), m.Config().VocabSize)
	m.Close()

	dir := tinyModel(t, 300)
	_, err = LoadModel(dir, tok, 1)
	assert.EqualError(t, err, dir+": vocabulary of 300 tokens, the task's byte tokenizer has "+strconv.Itoa(tok.VocabSize()))
	_, err = LoadModel(filepath.Join(t.TempDir(), "missing"), tok, 1)
	assert.Error(t, err)
}

// TestHFCheckpointFiles: the tokenizer files WriteTokenizerInfo writes
// load as a tokenizer that encodes the task's texts as the byte
// tokenizer does and renders a problem's chat as PromptText; the
// problems written by VerlExamples load through agentrl.LoadPrompts as
// exactly the prompts the task trains and evaluates on.
func TestHFCheckpointFiles(t *testing.T) {
	ctx := context.Background()
	tok, err := NewTokenizer()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, WriteTokenizerInfo(dir, tok))
	bpe, err := tokenizer.Load(dir)
	require.NoError(t, err)
	assert.Equal(t, tok.VocabSize(), bpe.VocabSize())
	imEnd, _ := tok.TokenID(ImEnd)
	assert.Equal(t, []int{imEnd}, bpe.EOSIDs(), "<|im_end|>, the eos_token_id of the task's model")
	for _, name := range []string{"<|im_end|>", "<|im_start|>user\n", "<|im_start|>assistant\n"} {
		id, _ := tok.TokenID(name)
		assert.True(t, bpe.IsSpecial(id), "%q is a control token", name)
	}
	for _, name := range []string{CallOpen, CallClose, CodePrefix, ArgsClose, BoxedOpen, "<tool_response>"} {
		id, _ := tok.TokenID(name)
		assert.False(t, bpe.IsSpecial(id), "%q is markup a server must keep in its text", name)
	}

	spec := SpecFor(&tool.Calculator{})
	probs := GenerateProblems(5, 20, "eval")
	sft, err := BuildSFT(ctx, probs, SFTToolUse(len(probs), 0.5, 5), tok, spec)
	require.NoError(t, err)
	for i, p := range probs {
		want := PromptText(p, spec)
		for _, ct := range []interface {
			ApplyChatTemplate([]tokenizer.Message, []json.RawMessage, tokenizer.ChatOptions) (string, error)
		}{tok, bpe} {
			got, err := ct.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: p.Text}}, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
		text := tok.Decode(sft[i].IDs)
		assert.Equal(t, tok.Encode(text), bpe.Encode(text), "%q", text)
	}

	file := filepath.Join(t.TempDir(), "heldout.jsonl")
	require.NoError(t, dataset.WriteJSONLFile(file, VerlExamples(probs, "test")))
	prompts, dropped, err := agentrl.LoadPrompts(ctx, []string{file}, bpe, []tool.Tool{spec.Tool}, agentrl.PromptOptions{})
	require.NoError(t, err)
	assert.Zero(t, dropped)
	want := Prompts(probs, spec)
	require.Len(t, prompts, len(probs))
	for i, p := range prompts {
		assert.Equal(t, tok.Encode(want[i].Text), p.Tokens, "prompt %d", i)
		assert.Equal(t, want[i].GroundTruth, p.GroundTruth)
		assert.Equal(t, "arith", p.DataSource)
		assert.Equal(t, probs[i].Expr, p.Extra["expr"])
	}
}

// BuildSFT writes a tool call exactly where SFTToolUse's marks say, and
// the marks give about the share -no-tool-frac asks for to guesses.
func TestSFTToolUse(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	spec := SpecFor(&tool.Calculator{})
	probs := GenerateProblems(3, 200, "sft")
	sft, err := BuildSFT(context.Background(), probs, SFTToolUse(len(probs), 0.5, 3), tok, spec)
	require.NoError(t, err)
	uses := SFTToolUse(len(probs), 0.5, 3)
	calls := 0
	for i, s := range sft {
		assert.Equal(t, strings.Contains(tok.Decode(s.IDs), CallOpen), uses[i], "trajectory %d", i)
		if uses[i] {
			calls++
		}
	}
	assert.InDelta(t, 100, calls, 15, "about half call the tool")
	assert.NotContains(t, SFTToolUse(50, 1, 3), true, "-no-tool-frac 1: none")
	assert.NotContains(t, SFTToolUse(50, 0, 3), false, "-no-tool-frac 0: all")
}

// SFTOrder: the first ToolFirst of the updates train on tool calls
// only, in passes over them; the rest are the batches the SFT trainer
// draws by itself, from its first, so they hold the data's share of
// guesses. The same options give the same order.
func TestSFTOrder(t *testing.T) {
	const n, batch, steps = 400, 8, 200
	tool := SFTToolUse(n, 0.5, 4)
	o := SFTOptions{Steps: steps, Batch: batch, Seed: 4, ToolFirst: 0.3}
	order, err := SFTOrder(tool, o)
	require.NoError(t, err)
	require.Len(t, order, steps)
	calls := 0
	for _, t := range tool {
		if t {
			calls++
		}
	}
	pass := calls / batch // updates per pass over the tool calls, the short last batch dropped
	seen := map[int]int{}
	for s, b := range order[:60] {
		require.Len(t, b, batch)
		for _, i := range b {
			assert.True(t, tool[i], "update %d trains on guess %d", s+1, i)
			seen[i]++
		}
		if s+1 == pass {
			assert.Len(t, seen, pass*batch, "a pass draws each tool call at most once")
		}
	}
	for i, c := range seen {
		assert.LessOrEqual(t, c, (60+pass-1)/pass, "trajectory %d: once per pass", i)
	}

	// The rest: the trainer's own first batches over the whole data.
	sampler, err := dataset.NewSampler(n, dataset.SamplerConfig{BatchSize: batch, Seed: 4, Shuffle: true, DropLast: true})
	require.NoError(t, err)
	guesses := 0
	for s, b := range order[60:] {
		assert.Equal(t, sampler.Next(), b, "update %d", 61+s)
		for _, i := range b {
			if !tool[i] {
				guesses++
			}
		}
	}
	share := 1 - float64(calls)/n
	assert.InDelta(t, share, float64(guesses)/(140*batch), 0.03, "the data's share of guesses")

	again, err := SFTOrder(tool, o)
	require.NoError(t, err)
	assert.Equal(t, order, again)
	o.Seed = 5
	other, err := SFTOrder(tool, o)
	require.NoError(t, err)
	assert.NotEqual(t, order[:60], other[:60], "another seed, another order")

	for _, tc := range []struct {
		name string
		tool []bool
		o    SFTOptions
		msg  string
	}{
		{"negative", tool, SFTOptions{Steps: 10, Batch: 8, ToolFirst: -0.1}, "SFT tool-first fraction -0.1: want within [0, 1)"},
		{"all", tool, SFTOptions{Steps: 10, Batch: 8, ToolFirst: 1}, "SFT tool-first fraction 1: want within [0, 1)"},
		{"NaN", tool, SFTOptions{Steps: 10, Batch: 8, ToolFirst: math.NaN()}, "SFT tool-first fraction NaN: want within [0, 1)"},
		{"batch", tool, SFTOptions{Steps: 10, Batch: 0, ToolFirst: 0.5}, "SFT batch 0: want within [1, 400], the trajectories"},
		{"too few tool calls", []bool{true, false, false, false}, SFTOptions{Steps: 10, Batch: 2, ToolFirst: 0.5}, "SFT tool-first batches of 2: only 1 trajectories call the tool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SFTOrder(tc.tool, tc.o)
			assert.EqualError(t, err, tc.msg)
		})
	}
}

// PairSFT writes every problem twice in a row, the first calling the
// tool and the second guessing, from the same prompt; BuildSFT follows
// the marks and refuses marks of another length.
func TestPairSFT(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	spec := SpecFor(&tool.Calculator{})
	probs := GenerateProblems(6, 5, "sft")
	paired, marks := PairSFT(probs)
	require.Len(t, paired, 10)
	assert.Equal(t, []bool{true, false, true, false, true, false, true, false, true, false}, marks)
	sft, err := BuildSFT(context.Background(), paired, marks, tok, spec)
	require.NoError(t, err)
	for i, p := range probs {
		with, without := tok.Decode(sft[2*i].IDs), tok.Decode(sft[2*i+1].IDs)
		prompt := PromptText(p, spec)
		assert.True(t, strings.HasPrefix(with, prompt), "pair %d: the problem's prompt", i)
		assert.True(t, strings.HasPrefix(without, prompt), "pair %d: the problem's prompt", i)
		assert.Contains(t, with, CallOpen, "pair %d: the first calls", i)
		assert.NotContains(t, without, CallOpen, "pair %d: the second guesses", i)
		assert.True(t, strings.HasSuffix(without, Answer(RoughGuess(p.Answer))), "pair %d: %q", i, without)
	}
	_, err = BuildSFT(context.Background(), paired, marks[:3], tok, spec)
	assert.EqualError(t, err, "SFT: 3 tool marks for 10 problems")
}

// SFTOrder with Pairs: every batch trains the problems the trainer
// would draw from the problems alone (a dataset.Sampler over them, the
// reference here), the first half of them as their tool call (2p) and
// the rest as their guess (2p+1), so exactly half of it calls the tool;
// a problem is trained both ways over the passes; with ToolFirst the
// tool-only batches come first; the same seed gives the same order and
// an odd batch is refused.
func TestSFTOrderPairs(t *testing.T) {
	const problems, batch, steps = 40, 8, 30
	_, marks := PairSFT(GenerateProblems(7, problems, "sft"))
	o := SFTOptions{Steps: steps, Batch: batch, Seed: 7, Pairs: true, Tool: marks}
	order, err := SFTOrder(marks, o)
	require.NoError(t, err)
	require.Len(t, order, steps)
	sampler, err := dataset.NewSampler(problems, dataset.SamplerConfig{BatchSize: batch, Seed: 7, Shuffle: true, DropLast: true})
	require.NoError(t, err)
	kinds := map[int]map[bool]bool{} // problem → the kinds it was trained as
	for s, b := range order {
		want := sampler.Next()
		require.Len(t, b, batch, "update %d", s+1)
		calls := 0
		for j, i := range b {
			assert.Equal(t, want[j], i/2, "update %d, position %d: the trainer's problem", s+1, j)
			assert.Equal(t, j < batch/2, marks[i], "update %d, position %d: the first half calls", s+1, j)
			if marks[i] {
				calls++
			}
			if kinds[i/2] == nil {
				kinds[i/2] = map[bool]bool{}
			}
			kinds[i/2][marks[i]] = true
		}
		assert.Equal(t, batch/2, calls, "update %d: half call the tool", s+1)
	}
	both := 0
	for _, k := range kinds {
		if len(k) == 2 {
			both++
		}
	}
	assert.Greater(t, both, problems/4, "over six passes, many problems are trained both ways")
	again, err := SFTOrder(marks, o)
	require.NoError(t, err)
	assert.Equal(t, order, again)

	o.ToolFirst = 0.2
	mixed, err := SFTOrder(marks, o)
	require.NoError(t, err)
	for s, b := range mixed[:6] {
		for _, i := range b {
			assert.True(t, marks[i], "update %d trains on guess %d", s+1, i)
		}
	}
	assert.Equal(t, order[:steps-6], mixed[6:], "then the pairs' order from its start")

	_, err = SFTOrder(marks, SFTOptions{Steps: 3, Batch: 5, Pairs: true})
	assert.EqualError(t, err, "SFT pairs: batch 5 and 80 trajectories: want both even")
	_, err = SFTOrder(marks[:79], SFTOptions{Steps: 3, Batch: 4, Pairs: true})
	assert.EqualError(t, err, "SFT pairs: batch 4 and 79 trajectories: want both even")
	_, err = SFTOrder(marks, SFTOptions{Steps: 3, Batch: 42, Pairs: true})
	assert.EqualError(t, err, "SFT pairs: batch 42: want at most 40, the problems")
}

// TestWriteGenerations: one JSON object per line in <step>.jsonl, the
// step set on every row, tags and ampersands as they are (the expected
// bytes written by hand from encoding/json's rules: fields in struct
// order, no spaces, HTML escaping off).
func TestWriteGenerations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "validation")
	gens := []Generation{
		{Input: "<|im_start|>user\nQ?", Output: "<answer>A & B</answer>", GTS: `{"target":["A & B"]}`, Score: 1, Acc: true, Pred: "A & B"},
		{Input: "q", Output: "", GTS: "x", Score: 0, Step: 99},
	}
	require.NoError(t, WriteGenerations(dir, 7, gens))
	b, err := os.ReadFile(filepath.Join(dir, "7.jsonl"))
	require.NoError(t, err)
	assert.Equal(t, `{"input":"<|im_start|>user\nQ?","output":"<answer>A & B</answer>","gts":"{\"target\":[\"A & B\"]}","score":1,"step":7,"acc":true,"pred":"A & B"}`+"\n"+
		`{"input":"q","output":"","gts":"x","score":0,"step":7,"acc":false,"pred":""}`+"\n", string(b))
	assert.Equal(t, 99, gens[1].Step, "the caller's slice is left as it was")
	// A folder that cannot be made (under a file) is an error.
	assert.Error(t, WriteGenerations(filepath.Join(dir, "7.jsonl", "sub"), 0, gens))
}

// TestEvaluateToolAcc scores a scripted policy on four problems, one
// sample each, through the task's engine, calculator and reward: it
// calls the tool and copies the result (right), calls it and writes
// another number (wrong), guesses the exact answer without a call
// (right), guesses roughly (wrong). So avg@1 = 2/4, answers without a
// tool 2/4, 1 tool call per 2 answers, and right with the tool 1/2.
func TestEvaluateToolAcc(t *testing.T) {
	ctx := context.Background()
	tok, err := NewTokenizer()
	require.NoError(t, err)
	spec := SpecFor(&tool.Calculator{})
	probs := GenerateProblems(3, 4, "eval")
	answers := []string{strconv.FormatInt(probs[0].Answer, 10), strconv.FormatInt(probs[1].Answer+1, 10),
		strconv.FormatInt(probs[2].Answer, 10), RoughGuess(probs[3].Answer)}
	require.NotEqual(t, answers[3], strconv.FormatInt(probs[3].Answer, 10), "a rough guess that happens to be exact")
	ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
	for i, p := range probs {
		var turns []policytest.Response
		if i < 2 {
			turns = append(turns, policytest.Text(spec.Call(p.Expr)))
		}
		turns = append(turns, policytest.Text(Answer(answers[i])))
		ps.HandleText(PromptText(p, spec), turns...)
	}
	engine, err := NewEngine(ps, tok, spec.Tool, 128)
	require.NoError(t, err)
	rf, err := NewReward()
	require.NoError(t, err)
	e, err := Evaluate(ctx, engine, rf, probs, spec, lm.SampleParams{Temperature: 1, TopP: 1, TopK: -1, MaxNewTokens: 128}, 1)
	require.NoError(t, err)
	assert.Equal(t, 0.5, e.Avg)
	assert.Equal(t, 0.5, e.NoTool)
	assert.Equal(t, 0.5, e.ToolCalls)
	assert.Equal(t, 0.5, e.ToolAcc)
	require.Len(t, e.Generations, 4)
	for i, g := range e.Generations {
		assert.Equal(t, answers[i], g.Pred, "problem %d", i)
	}

	var out bytes.Buffer
	PrintTable(&out, 1, []Named{{Name: "scripted", Eval: e}})
	assert.Contains(t, out.String(), "right w/ tool")
	assert.Regexp(t, `scripted\s+50\.0%\s+50\.0%\s+50\.0%\s+0\.50\s+50\.0%\s+50\.0%`, out.String())
}

// TestGenerateBalancedProblems: n = 10 gives 3, 3, 2 and 2 answers of
// 4, 5, 6 and 7 digits (n/4 each, the shorter n mod 4 = 2 lengths one
// more), numbered in order, each a problem GenerateProblems draws from
// the same seed, in the same order, with its answer right.
func TestGenerateBalancedProblems(t *testing.T) {
	calc := &tool.Calculator{}
	for _, seed := range []uint64{1, 2, 77} {
		got := GenerateBalancedProblems(seed, 10, "sft")
		require.Len(t, got, 10)
		byLen := map[int]int{}
		for i, p := range got {
			assert.Equal(t, "sft-"+strconv.Itoa(i), p.ID)
			byLen[len(strconv.FormatInt(p.Answer, 10))]++
			v, err := calc.Evaluate(p.Expr)
			require.NoError(t, err)
			assert.Equal(t, strconv.FormatInt(p.Answer, 10), v.String(), p.Expr)
		}
		assert.Equal(t, map[int]int{4: 3, 5: 3, 6: 2, 7: 2}, byLen, "seed %d", seed)

		drawn := GenerateProblems(seed, 2000, "x")
		j := 0
		for _, p := range got {
			for j < len(drawn) && drawn[j].Text != p.Text {
				j++
			}
			require.Less(t, j, len(drawn), "seed %d: %q is not among the drawn problems, in order", seed, p.Text)
			assert.Equal(t, drawn[j].Expr, p.Expr)
			j++
		}
	}
}

// TestGenerateProblemsPinned pins the first problem of seed 1, as the
// generator gave it before drawing one problem became a function of its
// own, so that a change in the draws (which would change every run's
// data) fails here. 9116·73 = 665,468; − 955 − 860 = 663,653.
func TestGenerateProblemsPinned(t *testing.T) {
	assert.Equal(t, Problem{ID: "sft-0",
		Text:   "A ship carries 9116 crates of 73 kg each. It unloads 955 kg, then 860 kg more. How many kg are still on board?",
		Expr:   "9116*73-955-860",
		Answer: 663653, Steps: 3}, GenerateProblems(1, 1, "sft")[0])
}

// TestUntrainGuesses: after UntrainGuesses, a trajectory without the
// tool trains exactly its expression, " = \boxed{", "}" and the end of
// turn, and not the guess between the braces; a trajectory with the tool
// keeps its mask; marks of the wrong length are refused.
func TestUntrainGuesses(t *testing.T) {
	tok, err := NewTokenizer()
	require.NoError(t, err)
	spec := SpecFor(&tool.Calculator{})
	probs := GenerateProblems(4, 16, "sft")
	toolUse := SFTToolUse(len(probs), 0.5, 9)
	require.Contains(t, toolUse, true)
	require.Contains(t, toolUse, false)
	sft, err := BuildSFT(context.Background(), probs, toolUse, tok, spec)
	require.NoError(t, err)
	before, err := BuildSFT(context.Background(), probs, toolUse, tok, spec)
	require.NoError(t, err)
	require.NoError(t, UntrainGuesses(sft, toolUse, tok))
	for i, s := range sft {
		if toolUse[i] {
			assert.Equal(t, before[i].Mask, s.Mask, "problem %d calls the tool", i)
			continue
		}
		var trained, untrained []int
		for j, id := range s.IDs {
			switch {
			case s.Mask[j] == 1:
				trained = append(trained, id)
			case before[i].Mask[j] == 1:
				untrained = append(untrained, id)
			}
		}
		assert.Equal(t, probs[i].Expr+" = "+BoxedOpen+"}"+ImEnd, tok.Decode(trained), "problem %d", i)
		assert.Equal(t, RoughGuess(probs[i].Answer), tok.Decode(untrained), "problem %d", i)
	}
	assert.Error(t, UntrainGuesses(sft, toolUse[1:], tok))
}

// TestCacheToolInRollouts: the n samples of a problem make the same call;
// with CacheTool the interpreter runs once per problem and every sample
// sees what running it would print, so the evaluation's responses are
// those of the uncached tool, byte for byte.
func TestCacheToolInRollouts(t *testing.T) {
	ctx := context.Background()
	tl, closeTool, err := OpenTool("auto", &bytes.Buffer{}) // the interpreter where python3 exists
	require.NoError(t, err)
	defer closeTool()
	tok, err := NewTokenizer()
	require.NoError(t, err)
	spec := SpecFor(tl)
	probs := GenerateProblems(5, 3, "eval")
	const n = 4
	evaluate := func(with tool.Tool) Eval {
		ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
		for _, p := range probs {
			ps.HandleText(PromptText(p, spec), policytest.Text(spec.Call(p.Expr)), policytest.Text(Answer(strconv.FormatInt(p.Answer, 10))))
		}
		engine, err := NewEngine(ps, tok, with, 128)
		require.NoError(t, err)
		rf, err := NewReward()
		require.NoError(t, err)
		e, err := Evaluate(ctx, engine, rf, probs, spec, lm.SampleParams{Temperature: 1, TopP: 1, TopK: -1, MaxNewTokens: 128}, n)
		require.NoError(t, err)
		return e
	}
	want := evaluate(tl)
	cached, cache, err := CacheTool(tl, 16)
	require.NoError(t, err)
	got := evaluate(cached)
	require.Len(t, got.Generations, len(probs)*n)
	assert.Equal(t, want.Generations, got.Generations)
	assert.Equal(t, 1.0, got.Avg)
	for _, g := range got.Generations {
		assert.Contains(t, g.Output, "<tool_response>\n"+g.GTS, "the tool's output, as the model saw it")
	}
	st := cache.Stats()
	assert.Equal(t, tool.CacheStats{Calls: int64(len(probs) * n), Hits: st.Hits, Shared: st.Shared, Executed: int64(len(probs))}, st)
	assert.Equal(t, int64(len(probs)*(n-1)), st.Hits+st.Shared)
	assert.Regexp(t, `^`+tl.Name()+`: 12 calls, 3 run, 9 answered by an identical call \(\d kept, \d in flight\)$`, CacheSummary(cache))

	same, none, err := CacheTool(tl, 0)
	require.NoError(t, err)
	assert.Nil(t, none)
	assert.Equal(t, tl, same)
}

// TestToolCacheFlag: -tool-cache defaults to tool.DefaultCacheSize, takes
// 0 and positive sizes, and refuses the rest at parsing.
func TestToolCacheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		ok   bool
	}{
		{nil, tool.DefaultCacheSize, true},
		{[]string{"-tool-cache", "0"}, 0, true},
		{[]string{"-tool-cache", "64"}, 64, true},
		{[]string{"-tool-cache", "-1"}, 0, false},
		{[]string{"-tool-cache", "many"}, 0, false},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		var size int
		ToolCacheFlag(fs, &size)
		err := fs.Parse(tc.args)
		if !tc.ok {
			assert.Error(t, err, "%v", tc.args)
			continue
		}
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.want, size, "%v", tc.args)
	}
}
