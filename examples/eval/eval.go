package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// toolCallsVar is the per-sample variable counting tool calls.
const toolCallsVar = "tool_calls"

// evaluate wires the parts, rolls out and scores every prompt, and
// prints the report.
func evaluate(ctx context.Context, o options, stdout, stderr io.Writer) error {
	start := time.Now()
	tok, err := tokenizer.Load(o.model)
	if err != nil {
		return fmt.Errorf("-model: %w", err) // the error names the file and the tokenizer
	}
	var model *policy.Model
	if o.sampler == "local" {
		var dev *device.Device
		model, dev, err = setup.LoadOnDevice(ctx, o.device, o.model, stderr, policy.WithDecoder(tok.Decode), policy.WithSamplerSeed(o.seed))
		if err != nil {
			return fmt.Errorf("model: %w", err)
		}
		defer dev.Close()
		defer model.Close()
		if err := setup.CheckVocab(tok, model); err != nil {
			return fmt.Errorf("model %s: %w", o.model, err)
		}
	}
	sampler, err := setup.NewSampler(o.sampler, model, o.servedModel)
	if err != nil {
		return err
	}
	codeTool, harness, closeTools, err := setup.CodeTools(o.sandbox, o.sandboxWorkers, o.toolTimeout)
	if err != nil {
		return err
	}
	defer closeTools()
	rf, err := setup.NewReward(harness, o.toolBonus)
	if err != nil {
		return err
	}
	tools := []tool.Tool{codeTool}
	prompts, dropped, err := setup.LoadPrompts(ctx, o.data, o.promptKey, tok, tools, o.thinking, o.maxPrompt, o.n)
	if err != nil {
		return fmt.Errorf("-data: %w", err)
	}
	if dropped > 0 {
		fmt.Fprintf(stderr, "eval: %d prompts over -max-prompt %d tokens left out\n", dropped, o.maxPrompt)
	}
	ctxLen, err := contextLength(o.model, model)
	if err != nil {
		return fmt.Errorf("-model: %w", err)
	}
	prompts, refused, err := refuseOverlong(prompts, ctxLen, o.maxResponse)
	if err != nil {
		return err
	}
	prompts, noTruth := withoutGroundTruth(prompts)
	if noTruth > 0 {
		fmt.Fprintf(stdout, "skipped: %d prompts without a ground truth, which the rule reward needs; not rolled out or scored\n", noTruth)
	}
	if n := countRefused(refused); n > 0 {
		fmt.Fprintf(stdout, "refused: %d prompts longer than the %d tokens that the model's context of %d leaves beside -max-response %d; not rolled out or scored\n",
			n, ctxLen-o.maxResponse, ctxLen, o.maxResponse)
	}
	if len(prompts) == 0 {
		return fmt.Errorf("-data: no prompts to evaluate")
	}

	format := rollout.ChatML{}
	if !o.thinking {
		format.GenerationPrompt = setup.NoThinkPrompt
	}
	ecfg := rollout.Config{
		Sampler: sampler, Tokenizer: tok, Tools: tools,
		Parser: rollout.Hermes{}, Format: format,
		MaxTurns: o.maxTurns, MaxResponseTokens: o.maxResponse,
		ToolTimeout:   o.toolTimeout + o.toolTimeout/2,
		MaxConcurrent: o.concurrency,
	}
	if model != nil {
		ecfg.MaxTotalTokens = model.Config().MaxPositionEmbeddings
	}
	engine, err := rollout.NewEngine(ecfg)
	if err != nil {
		return err
	}

	var samples *bufio.Writer
	if o.samples != "" {
		f, err := os.Create(o.samples)
		if err != nil {
			return fmt.Errorf("-samples: %w", err)
		}
		defer f.Close()
		samples = bufio.NewWriter(f)
	}
	params := lm.SampleParams{Temperature: o.temperature, TopP: o.topP, TopK: -1}
	// Prompts go to the engine in chunks that keep about -concurrency
	// responses in flight, so that progress can be reported.
	chunk := max(1, o.concurrency/o.k)
	var recs []eval.Record
	for lo := 0; lo < len(prompts); lo += chunk {
		hi := min(lo+chunk, len(prompts))
		part, err := rollOut(ctx, engine, rf, prompts, lo, hi, o.k, params, o.seed, samples)
		if err != nil {
			return err
		}
		recs = append(recs, part...)
		fmt.Fprintf(stderr, "eval: %d/%d prompts (%s)\n", hi, len(prompts), time.Since(start).Round(time.Second))
	}
	if samples != nil {
		if err := samples.Flush(); err != nil {
			return fmt.Errorf("-samples: %w", err)
		}
	}
	res, err := eval.Evaluate(ctx, recs, eval.DefaultConfig())
	if err != nil {
		return err
	}
	return report(stdout, o, res, recs, refused, noTruth)
}

// withoutGroundTruth takes out the prompts without a ground truth, which
// the rule reward would score as wrong whatever the response, and
// returns how many it took out.
func withoutGroundTruth(prompts []agentrl.Prompt) ([]agentrl.Prompt, int) {
	kept := slices.DeleteFunc(prompts, func(p agentrl.Prompt) bool { return p.GroundTruth == "" })
	return kept, len(prompts) - len(kept)
}

// contextLength is the model's context in tokens (max_position_embeddings):
// the local model's, or that of the -model folder's config.json; 0 when
// a remote sampler's folder has none.
func contextLength(dir string, model *policy.Model) (int, error) {
	if model != nil {
		return model.Config().MaxPositionEmbeddings, nil
	}
	mc, err := policy.ReadConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return mc.MaxPositionEmbeddings, nil
}

// refuseOverlong takes out the prompts that leave less than the response
// budget in the model's context (ctxLen; 0: unknown, none taken out) and
// counts them per data source: their responses would be cut by the
// context and scored as wrong, so they are refused, not scored. A budget
// that fills the context is an error.
func refuseOverlong(prompts []agentrl.Prompt, ctxLen, budget int) ([]agentrl.Prompt, map[string]int, error) {
	if ctxLen == 0 {
		return prompts, nil, nil
	}
	if budget >= ctxLen {
		return nil, nil, fmt.Errorf("-max-response %d: the model's context is %d tokens (max_position_embeddings), prompt and response together: want less", budget, ctxLen)
	}
	refused := map[string]int{}
	kept := prompts[:0:0]
	for _, p := range prompts {
		if len(p.Tokens) > ctxLen-budget {
			refused[p.DataSource]++
			continue
		}
		kept = append(kept, p)
	}
	return kept, refused, nil
}

// countRefused is the number of refused prompts over every data source.
func countRefused(refused map[string]int) int {
	n := 0
	for _, c := range refused {
		n += c
	}
	return n
}

// rollOut samples k responses for prompts[lo:hi] and scores them. Sample
// s of prompt i is seeded with seed + i·k + s, so a run is reproducible on
// a sampler that honours seeds, whatever the chunking.
func rollOut(ctx context.Context, engine *rollout.Engine, rf reward.Func, prompts []agentrl.Prompt, lo, hi, k int, params lm.SampleParams, seed uint64, samples *bufio.Writer) ([]eval.Record, error) {
	reqs := make([]rollout.Request, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ps := params
		ps.Seed = new(seed + uint64(i)*uint64(k))
		reqs = append(reqs, rollout.Request{ID: strconv.Itoa(i), Prompt: prompts[i].Tokens, Params: ps, N: k})
	}
	trajs, err := engine.Run(ctx, reqs)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "rollout: ") { // the engine's own errors name it already
			err = fmt.Errorf("rollout: %w", err)
		}
		return nil, err
	}
	inputs := make([]reward.Input, len(trajs))
	for j := range trajs {
		inputs[j] = prompts[lo+trajs[j].Request].RewardInput(&trajs[j])
	}
	outs, err := reward.Batch(ctx, rf, inputs, reward.BatchOptions{})
	if err != nil {
		return nil, fmt.Errorf("reward: %w", err)
	}
	recs := make([]eval.Record, len(trajs))
	for j, t := range trajs {
		p := &prompts[lo+t.Request]
		recs[j] = eval.Record{
			DataSource: p.DataSource, PromptID: t.ID,
			Score: outs[j].Score, Acc: outs[j].Acc, Pred: outs[j].Pred,
			Extra: map[string]float64{toolCallsVar: float64(len(t.ToolCalls))},
		}
		if samples != nil {
			line, err := json.Marshal(sampleLine{
				Prompt: p.ID, DataSource: p.DataSource, Sample: t.Sample,
				Response: t.Response, GroundTruth: p.GroundTruth,
				Score: outs[j].Score, Acc: outs[j].Acc, Pred: outs[j].Pred, Reason: outs[j].Reason,
				Turns: len(t.Turns), ToolCalls: len(t.ToolCalls), Stop: string(t.Stop),
				ResponseTokens: t.ResponseLen(),
			})
			if err != nil {
				return nil, err
			}
			samples.Write(append(line, '\n'))
		}
	}
	return recs, nil
}

// sampleLine is one line of the -samples file.
type sampleLine struct {
	Prompt         string  `json:"prompt"`
	DataSource     string  `json:"data_source"`
	Sample         int     `json:"sample"`
	Response       string  `json:"response"`
	GroundTruth    string  `json:"ground_truth"`
	Score          float64 `json:"score"`
	Acc            bool    `json:"acc"`
	Pred           string  `json:"pred"`
	Reason         string  `json:"reason"`
	Turns          int     `json:"turns"`
	ToolCalls      int     `json:"tool_calls"`
	Stop           string  `json:"stop"`
	ResponseTokens int     `json:"response_tokens"`
}

// sourceRow is the summary of one data source.
type sourceRow struct {
	source  string
	prompts int
	// cols holds the values in column order.
	cols []col
}

// col is one column of a row; ok is false when the metric does not
// exist for the source, printed as "-" and explained under the table by
// why.
type col struct {
	name  string
	value float64
	ok    bool
	why   string
}

// Why a metric of the table has no value.
const (
	// whyFewSamples: best@k and maj@k draw k of a prompt's samples, and
	// a single sample has nothing to choose between.
	whyFewSamples = "needs -k 2 or more samples per prompt"
	// whyNoAnswers: maj@k votes over the extracted answers
	// (eval.Record.Pred), and there were none.
	whyNoAnswers = "no response had an answer to vote on (the reward found none in any sample: no final answer, no code block), so there is no majority answer; see -samples for the responses"
)

// summarise picks, per data source, the columns of the report.
func summarise(k int, res eval.Result, recs []eval.Record) []sourceRow {
	var rows []sourceRow
	prompts := map[string]map[string]bool{}
	for _, r := range recs {
		if prompts[r.DataSource] == nil {
			prompts[r.DataSource] = map[string]bool{}
			rows = append(rows, sourceRow{source: r.DataSource})
		}
		prompts[r.DataSource][r.PromptID] = true
	}
	noAnswers := !slices.ContainsFunc(recs, func(r eval.Record) bool { return r.Pred != "" })
	for i := range rows {
		src := rows[i].source
		rows[i].prompts = len(prompts[src])
		get := func(name, variable, metric string) col {
			v, ok := res.Value(src, variable, metric)
			return col{name: name, value: v, ok: ok}
		}
		// maj@k and best@k exist from k = 2 on; maj@k only where some
		// record has a Pred (eval.Evaluate).
		drawn := func(c col, noAnswers bool) col {
			switch {
			case c.ok:
			case k < 2:
				c.why = whyFewSamples
			case noAnswers:
				c.why = whyNoAnswers
			}
			return c
		}
		cs := []col{get(fmt.Sprintf("avg@%d", k), eval.VarAcc, fmt.Sprintf("mean@%d", k))}
		for _, kk := range eval.Ks(k) {
			cs = append(cs, get(fmt.Sprintf("pass@%d", kk), eval.VarAcc, fmt.Sprintf("pass@%d", kk)))
		}
		cs = append(cs,
			drawn(get(fmt.Sprintf("maj@%d", k), eval.VarAcc, fmt.Sprintf("maj@%d/mean", k)), noAnswers),
			drawn(get(fmt.Sprintf("best@%d", k), eval.VarAcc, fmt.Sprintf("best@%d/mean", k)), false),
			get("reward", eval.VarReward, fmt.Sprintf("mean@%d", k)),
			get("tool_calls", toolCallsVar, fmt.Sprintf("mean@%d", k)),
		)
		rows[i].cols = cs
	}
	return rows
}

// report prints the table and the JSON line, which counts the prompts
// refused for the context per data source ("refused") and those skipped
// for want of a ground truth ("no_ground_truth").
func report(w io.Writer, o options, res eval.Result, recs []eval.Record, refused map[string]int, noTruth int) error {
	rows := summarise(o.k, res, recs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "data_source\tprompts\t"
	for _, c := range rows[0].cols {
		header += c.name + "\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		line := r.source + "\t" + strconv.Itoa(r.prompts) + "\t"
		for _, c := range r.cols {
			if c.ok {
				line += strconv.FormatFloat(c.value, 'f', 4, 64) + "\t"
			} else {
				line += "-\t"
			}
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := explainMissing(w, rows); err != nil {
		return err
	}
	type jsonSource struct {
		DataSource string             `json:"data_source"`
		Prompts    int                `json:"prompts"`
		Metrics    map[string]float64 `json:"metrics"`
	}
	out := struct {
		Model       string             `json:"model"`
		Data        string             `json:"data"`
		K           int                `json:"k"`
		Temperature float64            `json:"temperature"`
		TopP        float64            `json:"top_p"`
		Sources     []jsonSource       `json:"sources"`
		Verl        map[string]float64 `json:"verl"`
		Refused     map[string]int     `json:"refused,omitempty"`
		NoTruth     int                `json:"no_ground_truth,omitempty"`
	}{Model: o.model, Data: o.data, K: o.k, Temperature: o.temperature, TopP: o.topP, Verl: res.Map(), Refused: refused, NoTruth: noTruth}
	for _, r := range rows {
		js := jsonSource{DataSource: r.source, Prompts: r.prompts, Metrics: map[string]float64{}}
		for _, c := range r.cols {
			if c.ok {
				js.Metrics[c.name] = c.value
			}
		}
		out.Sources = append(out.Sources, js)
	}
	line, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// explainMissing writes, under the table, one line for each column that
// reads "-" somewhere, saying why it has no value there: "maj@2 -: no
// response gave an answer …". The JSON line leaves such metrics out.
func explainMissing(w io.Writer, rows []sourceRow) error {
	type missing struct {
		why     string
		sources []string
	}
	var names []string
	byName := map[string]*missing{}
	for _, r := range rows {
		for _, c := range r.cols {
			if c.ok {
				continue
			}
			m := byName[c.name]
			if m == nil {
				why := c.why
				if why == "" {
					why = "not computed"
				}
				m = &missing{why: why}
				byName[c.name] = m
				names = append(names, c.name)
			}
			m.sources = append(m.sources, r.source)
		}
	}
	for _, name := range names {
		m := byName[name]
		where := ""
		if len(m.sources) < len(rows) {
			where = " (" + strings.Join(m.sources, ", ") + ")"
		}
		if _, err := fmt.Fprintf(w, "%s -%s: %s\n", name, where, m.why); err != nil {
			return err
		}
	}
	return nil
}
