package agentrl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// Prompt is one training prompt: what the rollout engine continues, and
// what the reward function checks the response against.
type Prompt struct {
	// ID names the prompt in logs; it need not be unique. The trainer
	// gives each rollout group its own id.
	ID string
	// The prompt, in exactly one of the forms rollout.Request takes:
	// token ids (chat template applied), text, or messages.
	Tokens   []int
	Text     string
	Messages []rollout.Message
	// Tools the model may call; nil means the engine's.
	Tools []tool.Tool
	// GroundTruth, DataSource and Extra are passed to the reward function,
	// and to the engine's environment factory (rollout.Config.Env) as the
	// request's rollout.Task.
	GroundTruth string
	DataSource  string
	Extra       map[string]any
}

// RewardInput is what a reward function sees of trajectory tr, sampled
// for p: the response text with the tool results as the model saw them,
// p's ground truth, data source and extra info, the turn and tool-call
// counts, the tools' own rewards, and the generated and tool-result token
// counts that overlong shaping measures. The trainer, evaluation and the
// example programs all score trajectories through it.
func (p *Prompt) RewardInput(tr *rollout.Trajectory) reward.Input {
	return reward.Input{
		Response: tr.Response, GroundTruth: p.GroundTruth, DataSource: p.DataSource, Extra: p.Extra,
		Turns: len(tr.Turns), ToolCalls: len(tr.ToolCalls), ToolRewards: tr.ToolRewards(),
		ResponseTokens: tr.SampledTokens(), ToolTokens: tr.ResultTokens(),
	}
}

// request is the rollout request of n samples of p with params.
func (p *Prompt) request(id string, params lm.SampleParams, n int) rollout.Request {
	return rollout.Request{
		ID: id, Prompt: p.Tokens, PromptText: p.Text, Messages: p.Messages, Tools: p.Tools, Params: params, N: n,
		Task: rollout.Task{GroundTruth: p.GroundTruth, DataSource: p.DataSource, Extra: p.Extra},
	}
}

// PromptsFromExamples turns verl-format examples into Prompts: the chat
// messages (roles and contents; the engine renders them with its Render
// function), the data source, extra_info, and the reward model's ground
// truth as text — a string as it is, anything else (a number, a list of
// answers, code tests) as JSON, the form reward.CodeFunc reads.
func PromptsFromExamples(examples []dataset.Example) ([]Prompt, error) {
	out := make([]Prompt, len(examples))
	for i, e := range examples {
		gt, ok := e.RewardModel.GroundTruth.Value.(string)
		if !ok && e.RewardModel.GroundTruth.Value != nil {
			b, err := json.Marshal(e.RewardModel.GroundTruth.Value)
			if err != nil {
				return nil, fmt.Errorf("agentrl: example %d (%s row %d): reward_model.ground_truth: %w", i, e.Source, e.Row, err)
			}
			gt = string(b)
		}
		msgs := make([]rollout.Message, len(e.Prompt))
		for j, m := range e.Prompt {
			msgs[j] = rollout.Message{Role: m.Role, Content: m.Content}
		}
		out[i] = Prompt{
			ID:          fmt.Sprintf("%s:%d", e.Source, e.Row),
			Messages:    msgs,
			GroundTruth: gt,
			DataSource:  e.DataSource,
			Extra:       e.ExtraInfo,
		}
	}
	return out, nil
}

// ChatTokenizer is what RenderPrompts needs from a tokenizer: the model's
// chat template and its encoder. policy/tokenizer's *BPE (Hugging Face
// tokenizer.json with tokenizer_config.json's chat template) and *Bytes
// implement it.
type ChatTokenizer interface {
	ApplyChatTemplate(messages []tokenizer.Message, tools []json.RawMessage, opts tokenizer.ChatOptions) (string, error)
	Encode(text string) []int
}

// PromptOptions configures RenderPrompts and LoadPrompts. The zero value
// renders with the template's own defaults and keeps every prompt.
type PromptOptions struct {
	// Vars are extra chat-template variables, as keyword arguments of
	// transformers' apply_chat_template: {"enable_thinking": false} turns
	// Qwen3's thinking off.
	Vars map[string]any
	// MaxTokens leaves out prompts longer than this many tokens, as verl's
	// data.filter_overlong_prompts does with data.max_prompt_length; 0
	// keeps them all.
	MaxTokens int

	// The fields below are read by LoadPrompts only.

	// PromptKey is the field that holds the prompt (verl's
	// data.prompt_key); "" means "prompt".
	PromptKey string
	// StringPrompt accepts a prompt that is a plain string, as one user
	// message (dataset.Options.StringPrompt); without it such a row is an
	// error, as in verl.
	StringPrompt bool
	// Limit keeps the first Limit examples of the files, before any is
	// left out for its length; 0 keeps them all.
	Limit int
}

func (o PromptOptions) check() error {
	if o.MaxTokens < 0 || o.Limit < 0 {
		return fmt.Errorf("agentrl: PromptOptions: MaxTokens %d and Limit %d must not be negative", o.MaxTokens, o.Limit)
	}
	return nil
}

// RenderPrompts turns prompts into token ids once, so that the trainer and
// the rollout engine work on ids: each prompt given as Messages is
// rendered with tok's chat template, the schemas of its tools (Prompt.Tools,
// or tools when that is nil) and the generation prompt, then encoded; one
// given as Text (a template already applied) is encoded; Tokens are kept
// as they are. Prompts over opts.MaxTokens tokens are left out; the
// rendered prompts come back in order, with Messages and Text cleared,
// together with the number left out. prompts itself is not modified.
func RenderPrompts(ctx context.Context, prompts []Prompt, tok ChatTokenizer, tools []tool.Tool, opts PromptOptions) ([]Prompt, int, error) {
	if tok == nil {
		return nil, 0, errors.New("agentrl: RenderPrompts: nil tokenizer")
	}
	if err := opts.check(); err != nil {
		return nil, 0, err
	}
	defaults, err := toolSchemas(tools)
	if err != nil {
		return nil, 0, err
	}
	chat := tokenizer.ChatOptions{AddGenerationPrompt: true, Vars: opts.Vars}
	out := make([]Prompt, len(prompts))
	copy(out, prompts)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range out {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			if err := renderPrompt(&out[i], tok, defaults, chat); err != nil {
				return fmt.Errorf("agentrl: prompt %d (%s): %w", i, out[i].ID, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	kept := out[:0]
	for _, p := range out {
		if opts.MaxTokens == 0 || len(p.Tokens) <= opts.MaxTokens {
			kept = append(kept, p)
		}
	}
	return kept, len(out) - len(kept), nil
}

// renderPrompt sets p.Tokens from the one form p is given in.
func renderPrompt(p *Prompt, tok ChatTokenizer, defaults []json.RawMessage, chat tokenizer.ChatOptions) error {
	forms := 0
	for _, set := range []bool{len(p.Tokens) > 0, p.Text != "", len(p.Messages) > 0} {
		if set {
			forms++
		}
	}
	if forms != 1 {
		return fmt.Errorf("set exactly one of Tokens, Text and Messages (%d set)", forms)
	}
	switch {
	case p.Text != "":
		p.Tokens, p.Text = tok.Encode(p.Text), ""
	case len(p.Messages) > 0:
		schemas := defaults
		if p.Tools != nil {
			var err error
			if schemas, err = toolSchemas(p.Tools); err != nil {
				return err
			}
		}
		msgs := make([]tokenizer.Message, len(p.Messages))
		for j, m := range p.Messages {
			msgs[j] = tokenizer.Message{Role: m.Role, Content: m.Content}
		}
		text, err := tok.ApplyChatTemplate(msgs, schemas, chat)
		if err != nil {
			return fmt.Errorf("chat template: %w", err)
		}
		p.Tokens, p.Messages = tok.Encode(text), nil
	}
	if len(p.Tokens) == 0 {
		return errors.New("the prompt encodes to no tokens")
	}
	return nil
}

// toolSchemas returns the tools' schemas in order.
func toolSchemas(tools []tool.Tool) ([]json.RawMessage, error) {
	schemas := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		if t == nil {
			return nil, fmt.Errorf("agentrl: tool %d is nil", i)
		}
		schemas[i] = t.Schema()
	}
	return schemas, nil
}

// LoadPrompts reads verl-format data files (parquet or JSON Lines, in
// order, see dataset.Load) into Prompts (PromptsFromExamples) and renders
// them with RenderPrompts: the ids of each chat under tok's template with
// the tools' schemas and the generation prompt. It returns the prompts
// kept and the number left out for being over opts.MaxTokens.
func LoadPrompts(ctx context.Context, files []string, tok ChatTokenizer, tools []tool.Tool, opts PromptOptions) ([]Prompt, int, error) {
	if len(files) == 0 {
		return nil, 0, errors.New("agentrl: LoadPrompts: no data files")
	}
	if err := opts.check(); err != nil {
		return nil, 0, err
	}
	exs, err := dataset.Load(ctx, dataset.Options{PromptKey: opts.PromptKey, StringPrompt: opts.StringPrompt}, files...)
	if err != nil {
		return nil, 0, err // dataset's errors name the file, row and field
	}
	if opts.Limit > 0 && len(exs) > opts.Limit {
		exs = exs[:opts.Limit]
	}
	prompts, err := PromptsFromExamples(exs)
	if err != nil {
		return nil, 0, err
	}
	return RenderPrompts(ctx, prompts, tok, tools, opts)
}
