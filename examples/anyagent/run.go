package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/anyagent/agent"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/progress"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// options are the command-line settings.
type options struct {
	out  string
	seed uint64
	init string

	hidden, layers, heads, kvHeads, headDim, ffn int

	sftSamples, sftSteps, sftBatch int
	sftLR, noToolFrac              float64

	rlSteps, prompts, n, miniBatch, maxResponse int
	rlLR, temperature                           float64

	evalProblems int
}

const synopsis = "anyagent [-out DIR] [-seed N] [-init SFT-MODEL] [flags]"

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := setup.NewFlagSet("anyagent", synopsis, stderr)
	fs.StringVar(&o.out, "out", "", "run folder (default ./runs/anyagent-<timestamp>)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the model, the problems and sampling; held-out problems use seed+1000")
	fs.StringVar(&o.init, "init", "", "start RL from this saved model folder (a run's sft-model) instead of running SFT")
	fs.IntVar(&o.hidden, "hidden", 128, "model hidden size")
	fs.IntVar(&o.layers, "layers", 2, "transformer layers")
	fs.IntVar(&o.heads, "heads", 4, "attention heads")
	fs.IntVar(&o.kvHeads, "kv-heads", 2, "key/value heads")
	fs.IntVar(&o.headDim, "head-dim", 32, "attention head size")
	fs.IntVar(&o.ffn, "ffn", 384, "MLP intermediate size")
	fs.IntVar(&o.sftSamples, "sft-samples", 12800, "generated SFT conversations")
	fs.IntVar(&o.sftSteps, "sft-steps", 2000, "SFT updates")
	fs.IntVar(&o.sftBatch, "sft-batch", 16, "SFT sequences per update")
	fs.Float64Var(&o.sftLR, "sft-lr", 3e-3, "SFT peak learning rate (cosine decay to a tenth)")
	fs.Float64Var(&o.noToolFrac, "no-tool-frac", 0.5, "fraction of SFT conversations that answer with a rough guess instead of calling the calculator")
	fs.IntVar(&o.rlSteps, "rl-steps", arith.DefaultRLSteps, "GRPO-TCR steps")
	fs.IntVar(&o.prompts, "prompts", arith.DefaultPrompts, "problems per RL step")
	fs.IntVar(&o.n, "n", arith.DefaultN, "agent episodes per problem, in RL and evaluation")
	fs.IntVar(&o.miniBatch, "mini-batch", arith.DefaultMiniBatch, "trajectories per RL update; 0 means the whole batch")
	fs.IntVar(&o.maxResponse, "max-response", 64, "max_tokens of each chat call the agent makes")
	fs.Float64Var(&o.rlLR, "rl-lr", arith.DefaultRLLR, "RL learning rate")
	fs.Float64Var(&o.temperature, "temperature", arith.DefaultTemperature, "sampling temperature of the agent's calls")
	fs.IntVar(&o.evalProblems, "eval", 32, "held-out evaluation problems")
	if err := setup.Parse(fs, args); err != nil {
		return o, err
	}
	switch {
	case o.n < 2:
		return o, errors.New("-n must be at least 2: GRPO compares a problem's episodes")
	case o.prompts < 1 || o.rlSteps < 0 || o.evalProblems < 1 || o.maxResponse < 1:
		return o, errors.New("-prompts, -eval and -max-response must be positive, -rl-steps not negative")
	}
	return o, nil
}

// Chat markup. The template renders OpenAI's conversation as the
// model's turns are written: a tool call as
// <tool_call>{"name": …, "arguments": …}</tool_call> and the end of the
// turn, a tool message as a user turn holding <tool_response>; it lists
// no tools (the model knows its one tool).
const (
	imEnd    = "<|im_end|>"
	template = `{%- for m in messages %}` +
		`{%- if m.role == 'tool' %}{{ '<|im_start|>user\n<tool_response>\n' + m.content + '\n</tool_response><|im_end|>\n' }}` +
		`{%- elif m.role == 'assistant' %}{{ '<|im_start|>assistant\n' + (m.content or '') }}` +
		`{%- for tc in m.tool_calls or [] %}{{ '<tool_call>{"name": "' + tc.function.name + '", "arguments": ' + (tc.function.arguments | tojson) + '}</tool_call>' }}{%- endfor %}` +
		`{{ '<|im_end|>\n' }}` +
		`{%- else %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endif %}` +
		`{%- endfor %}` +
		`{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{%- endif %}`
)

// newTokenizer is the byte tokenizer of examples/arith's model with
// this program's template: the chat and tool-call markup are one token
// each.
func newTokenizer() (*tokenizer.Bytes, error) {
	return tokenizer.NewBytes(tokenizer.BytesConfig{
		Specials: []string{"<|endoftext|>", arith.ImStart, imEnd, arith.ImStart + "system\n", arith.ImStart + "user\n",
			arith.ImStart + "assistant\n", arith.CallOpen, arith.CallClose, "<tool_response>", "</tool_response>",
			arith.CalcPrefix, arith.ArgsClose, arith.BoxedOpen},
		EOS: []string{imEnd, "<|endoftext|>"}, ChatTemplate: template,
	})
}

// callText is the model's tool-call turn for expr, as the template
// renders the call.
func callText(expr string) string {
	return arith.CallOpen + arith.CalcPrefix + expr + arith.ArgsClose + arith.CallClose + imEnd
}

// buildSFT makes SFT conversations laid out as the endpoint will see
// them: the prompt, the call (mask 1), the glue the template renders
// around the calculator's result (mask 0), the boxed answer (mask 1);
// or, for a fraction noToolFrac, the expression and a rough guess.
// The pieces are cut from the template's rendering of the whole
// conversation, so they are what the recorder will tokenize.
func buildSFT(tok *tokenizer.Bytes, probs []arith.Problem, noToolFrac float64) ([]agentrl.SFTSample, error) {
	out := make([]agentrl.SFTSample, len(probs))
	for i, p := range probs {
		user := tokenizer.Message{Role: "user", Content: p.Text}
		prompt, err := tok.ApplyChatTemplate([]tokenizer.Message{user}, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			return nil, err
		}
		var s agentrl.SFTSample
		add := func(text string, mask float32) {
			ids := tok.Encode(text)
			s.IDs = append(s.IDs, ids...)
			for range ids {
				s.Mask = append(s.Mask, mask)
			}
		}
		add(prompt, 0)
		// A fixed fraction, spread evenly: problem i guesses when the
		// fractional part of i·noToolFrac steps over an integer.
		guess := int(float64(i+1)*noToolFrac) > int(float64(i)*noToolFrac)
		if guess {
			add(p.Expr+" = "+arith.Answer(arith.RoughGuess(p.Answer)), 1)
			out[i] = s
			continue
		}
		args, _ := json.Marshal(map[string]string{"expression": p.Expr})
		result := strconv.FormatInt(p.Answer, 10)
		full, err := tok.ApplyChatTemplate([]tokenizer.Message{user,
			{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{ID: "call_0", Type: "function", Function: tokenizer.FunctionCall{Name: "calculator", Arguments: args}}}},
			{Role: "tool", Content: result, ToolCallID: "call_0"}}, nil, tokenizer.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			return nil, err
		}
		call := callText(p.Expr)
		if !strings.HasPrefix(full, prompt+call) {
			return nil, fmt.Errorf("the template renders problem %d's call otherwise than %q: %q", i, call, full[len(prompt):])
		}
		add(call, 1)
		add(full[len(prompt)+len(call):], 0)
		add(arith.Answer(result), 1)
		out[i] = s
	}
	return out, nil
}

// endpoint is the recorder served on a local port.
type endpoint struct {
	rec *record.Recorder
	url string
	srv *http.Server
}

func startEndpoint(model lm.Sampler, tok *tokenizer.Bytes, maxContext int) (*endpoint, error) {
	rec, err := record.New(record.Config{Sampler: model, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok,
		Name: "arith", MaxContext: maxContext, RequireSession: true})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &endpoint{rec: rec, url: "http://" + ln.Addr().String(), srv: srv}, nil
}

func (e *endpoint) close() { _ = e.srv.Close() }

// runAgent is the record.Agent: it runs the agent program on the
// episode's problem against the episode's base URL and posts its
// reward, +1 for the right boxed answer and −1 otherwise.
func runAgent(rec *record.Recorder, answers map[string]string) record.Agent {
	return func(ctx context.Context, ep record.Episode) error {
		problem := ep.Request.Messages[len(ep.Request.Messages)-1].Content
		want, ok := answers[problem]
		if !ok {
			return fmt.Errorf("no answer for problem %q", problem)
		}
		res, err := agent.Solve(ctx, ep.BaseURL, problem)
		if err != nil {
			return err
		}
		out := reward.Output{Score: -1, Pred: res.Answer, Reason: "wrong answer"}
		if res.Answer == want {
			out = reward.Output{Score: 1, Acc: true, Pred: res.Answer, Reason: "right answer"}
		}
		return rec.SetReward(ep.Session, out)
	}
}

// evaluation is the agent's record on held-out problems.
type evaluation struct {
	Acc       float64 `json:"acc"`        // episodes with the right answer
	ToolCalls float64 `json:"tool_calls"` // calculator calls per episode
	NoTool    float64 `json:"no_tool"`    // episodes without a call
}

// metrics are e's figures under the names metrics.jsonl gives them.
func (e evaluation) metrics() map[string]float64 {
	return map[string]float64{"val/heldout/acc": e.Acc, "val/heldout/tool_calls": e.ToolCalls, "val/heldout/no_tool": e.NoTool}
}

// String is e in words, for the log.
func (e evaluation) String() string {
	return fmt.Sprintf("acc %.3f, %.2f tool calls per episode, %.3f without a call", e.Acc, e.ToolCalls, e.NoTool)
}

// evaluate runs the agent k times on each of probs through src, with
// params, and says how it did.
func evaluate(ctx context.Context, src *record.Source, probs []arith.Problem, params lm.SampleParams, k int) (evaluation, error) {
	reqs := make([]rollout.Request, len(probs))
	for i, p := range probs {
		ps := params
		ps.Seed = new(uint64(1_000_000 + i*k))
		reqs[i] = rollout.Request{ID: p.ID, Messages: []rollout.Message{{Role: "user", Content: p.Text}}, Params: ps, N: k}
	}
	trajs, outs, err := src.Rollout(ctx, reqs)
	if err != nil {
		return evaluation{}, err
	}
	var e evaluation
	for i, tr := range trajs {
		if outs[i] != nil && outs[i].Acc {
			e.Acc++
		}
		e.ToolCalls += float64(len(tr.ToolCalls))
		if len(tr.ToolCalls) == 0 {
			e.NoTool++
		}
	}
	n := float64(len(trajs))
	return evaluation{Acc: e.Acc / n, ToolCalls: e.ToolCalls / n, NoTool: e.NoTool / n}, nil
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	start := time.Now()
	tok, err := newTokenizer()
	if err != nil {
		return err
	}
	dir := o.out
	if dir == "" {
		dir = filepath.Join("runs", "anyagent-"+time.Now().UTC().Format("20060102-150405"))
	}
	rd, err := setup.LockRunDir(dir) // a second run on the folder stops at once
	if err != nil {
		return err
	}
	defer rd.Release()
	if err := rd.CheckNew("metrics.jsonl"); err != nil {
		return err
	}
	model, err := openModel(o, tok)
	if err != nil {
		return err
	}
	defer model.Close()
	if o.init == "" {
		data, err := buildSFT(tok, arith.GenerateProblems(o.seed, o.sftSamples, "sft"), o.noToolFrac)
		if err != nil {
			return err
		}
		if err := runSFT(ctx, o, model, data, stderr); err != nil {
			return err
		}
		if err := model.Save(filepath.Join(dir, "sft-model"), lm.SaveOptions{}); err != nil {
			return err
		}
	}

	ep, err := startEndpoint(model, tok, model.Config().MaxPositionEmbeddings)
	if err != nil {
		return err
	}
	defer ep.close()
	train := arith.GenerateProblems(o.seed+500, max(o.prompts*4, 64), "rl")
	heldOut := arith.GenerateProblems(o.seed+1000, o.evalProblems, "heldout")
	answers := map[string]string{}
	for _, p := range append(train, heldOut...) {
		answers[p.Text] = strconv.FormatInt(p.Answer, 10)
	}
	src, err := record.NewSource(record.SourceConfig{Recorder: ep.rec, URL: ep.url, Agent: runAgent(ep.rec, answers),
		Concurrency: 8, Timeout: 5 * time.Minute, FailScore: -1})
	if err != nil {
		return err
	}
	cfg := arith.RLConfig(arith.RLOptions{Prompts: o.prompts, N: o.n, MiniBatch: o.miniBatch, Temperature: o.temperature,
		MaxResponse: o.maxResponse, LR: o.rlLR, Seed: o.seed})
	cfg.Overlong = nil // the agent posts every reward; no reward function to shape
	params := cfg.Sampling

	mlog, err := metrics.Open(filepath.Join(dir, "metrics.jsonl"), metrics.Options{})
	if err != nil {
		return err
	}
	defer mlog.Close()
	fmt.Fprintf(stderr, "evaluating the SFT policy through the agent on %d held-out problems × %d episodes\n", len(heldOut), o.n)
	before, err := evaluate(ctx, src, heldOut, params, o.n)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sft policy: %s\n", before)
	if err := mlog.Log(0, before.metrics()); err != nil {
		return err
	}
	prompts := make([]agentrl.Prompt, len(train))
	for i, p := range train {
		prompts[i] = agentrl.Prompt{ID: p.ID, Messages: []rollout.Message{{Role: "user", Content: p.Text}}, GroundTruth: answers[p.Text]}
	}
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: model, Source: src, Prompts: prompts, Metrics: mlog})
	if err != nil {
		return err
	}
	after := before
	if o.rlSteps > 0 {
		err := tr.Run(ctx, agentrl.RunConfig{Steps: o.rlSteps,
			Recorder: progress.New(progress.Config{Out: stderr, Description: "grpo-tcr via the agent", Interval: 10 * time.Second}),
			// After the last step: the RL policy through the agent, in
			// that step's row of metrics.jsonl.
			Validate: func(ctx context.Context, _ int) (map[string]float64, error) {
				fmt.Fprintf(stderr, "evaluating the RL policy through the agent\n")
				var err error
				if after, err = evaluate(ctx, src, heldOut, params, o.n); err != nil {
					return nil, err
				}
				return after.metrics(), nil
			}})
		if err != nil {
			return err
		}
	}
	if err := model.Save(filepath.Join(dir, "model"), lm.SaveOptions{}); err != nil {
		return err
	}
	st := src.Stats()
	fmt.Fprintf(stdout, "%-6s %8s %11s %8s\n", "policy", "acc", "tool calls", "no tool")
	for _, r := range []struct {
		name string
		e    evaluation
	}{{"sft", before}, {"rl", after}} {
		fmt.Fprintf(stdout, "%-6s %8.3f %11.2f %8.3f\n", r.name, r.e.Acc, r.e.ToolCalls, r.e.NoTool)
	}
	fmt.Fprintf(stdout, "episodes %d (failed %d), chat calls %d: %d reused the sampled tokens, %d would have drifted if re-tokenized, %d episodes rewrote their history\n",
		st.Episodes, st.Failed, st.Calls, st.Reused, st.Drifted, st.Rewritten)
	line, err := json.Marshal(map[string]any{"sft": before, "rl": after, "sessions": st, "seconds": int(time.Since(start).Seconds())})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

// openModel is a fresh Qwen3-style model of the flags' size over the
// tokenizer, or the saved one -init names.
func openModel(o options, tok *tokenizer.Bytes) (*policy.Model, error) {
	opts := []policy.ModelOption{policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(o.seed)}
	if o.init != "" {
		return arith.LoadModel(o.init, tok, o.seed)
	}
	eos, _ := tok.TokenID(imEnd)
	raw, err := json.Marshal(map[string]any{
		"model_type": "qwen3", "vocab_size": tok.VocabSize(), "hidden_size": o.hidden,
		"intermediate_size": o.ffn, "num_hidden_layers": o.layers, "num_attention_heads": o.heads,
		"num_key_value_heads": o.kvHeads, "head_dim": o.headDim, "max_position_embeddings": 512,
		"rope_theta": 10000, "tie_word_embeddings": true, "eos_token_id": eos, "torch_dtype": "float32",
	})
	if err != nil {
		return nil, err
	}
	cfg, err := policy.ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	return policy.New(cfg, o.seed, opts...)
}

func runSFT(ctx context.Context, o options, model *policy.Model, data []agentrl.SFTSample, stderr io.Writer) error {
	if o.sftSteps == 0 {
		return nil
	}
	per := max(len(data)/o.sftBatch, 1)
	opt := policy.DefaultAdamWConfig()
	opt.LR = o.sftLR
	opt.WeightDecay = 0.01
	opt.Schedule = policy.CosineSchedule{WarmupSteps: int64(max(o.sftSteps/20, 1)), TotalSteps: int64(o.sftSteps), MinLRRatio: 0.1}
	tr, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{BatchSize: o.sftBatch, Epochs: (o.sftSteps + per - 1) / per,
		Optimizer: opt, MaxGradNorm: 1, Seed: o.seed}, agentrl.SFTParts{Policy: model, Data: data})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sft: %d conversations (%.0f%% answer without the tool), %d updates of %d\n", len(data), 100*o.noToolFrac, o.sftSteps, o.sftBatch)
	return tr.Run(ctx, agentrl.RunConfig{Steps: o.sftSteps,
		Recorder: progress.New(progress.Config{Out: stderr, Description: "sft", Interval: 10 * time.Second})})
}
