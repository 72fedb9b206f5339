package hftrain

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
	"github.com/agentrl/agentrl/tool"
)

// LoadPrompts reads verl-format prompt files (parquet or JSON Lines, see
// agentrl.LoadPrompts) and renders each chat once with the model's chat
// template, the tools' schemas and the generation prompt. Prompts over
// opts.MaxPromptTokens() are left out and counted: opts.ContextTokens
// defaults to the model's context, so a prompt that leaves less than
// opts.ResponseTokens of it (with ResponseTokens 0: a prompt that fills
// it) never reaches the engine. With Options.DisableThinking the
// template's enable_thinking is false unless opts.Vars says otherwise.
func (m *Model) LoadPrompts(ctx context.Context, files []string, tools []tool.Tool, opts agentrl.PromptOptions) ([]agentrl.Prompt, int, error) {
	return agentrl.LoadPrompts(ctx, files, m.Tokenizer, tools, m.promptOptions(opts))
}

// RenderPrompts renders prompts given as Text or Messages into token
// ids as LoadPrompts does (agentrl.RenderPrompts), leaving out those over
// opts.MaxPromptTokens().
func (m *Model) RenderPrompts(ctx context.Context, prompts []agentrl.Prompt, tools []tool.Tool, opts agentrl.PromptOptions) ([]agentrl.Prompt, int, error) {
	return agentrl.RenderPrompts(ctx, prompts, m.Tokenizer, tools, m.promptOptions(opts))
}

// promptOptions is opts with the model's context and thinking setting.
func (m *Model) promptOptions(opts agentrl.PromptOptions) agentrl.PromptOptions {
	if opts.ContextTokens == 0 {
		opts.ContextTokens = m.ContextLength()
	}
	if _, set := opts.Vars["enable_thinking"]; m.noThinking && !set {
		vars := maps.Clone(opts.Vars)
		if vars == nil {
			vars = map[string]any{}
		}
		vars["enable_thinking"] = false
		opts.Vars = vars
	}
	return opts
}

// Rollout configures the rollout engine NewEngine builds over the model.
type Rollout struct {
	// Tools are the tools the model may call (their schemas are rendered
	// into the prompts by LoadPrompts and NewTrainer).
	Tools []tool.Tool
	// MaxResponseTokens bounds the tokens after the prompt, generated
	// and tool results (verl's data.max_response_length); required. The
	// overlong penalty of TrainerConfig.Overlong is measured against it.
	MaxResponseTokens int
	// MaxTurns bounds the assistant turns of a trajectory and
	// MaxToolCalls its tool calls; 0 means no bound.
	MaxTurns, MaxToolCalls int
	// ToolTimeout bounds each tool call; 0 leaves it to the tool.
	ToolTimeout time.Duration
	// MaxConcurrent bounds the trajectories in flight; 0 means 256.
	MaxConcurrent int
	// Sampler generates the turns; nil means the model itself, on its
	// device, bounded by its context. A *fleet.Fleet samples on
	// inference servers that get the trained weights (give it as
	// TrainerParts.Sync too); a policy/openai sampler on servers that
	// keep theirs.
	Sampler lm.Sampler
	// Parser finds tool calls and Format renders tool results; nil means
	// the model's own (Model.ToolFormat).
	Parser rollout.Parser
	Format rollout.ResultFormat
}

// NewEngine returns the rollout engine of r over the model: its
// tokenizer, r's tools, parser and result format (by default the chat
// template's, ToolFormat), and r's budgets; with
// the model as its sampler, the whole sequence is also bounded by the
// model's context.
func (m *Model) NewEngine(r Rollout) (*rollout.Engine, error) {
	if r.MaxResponseTokens <= 0 {
		return nil, fmt.Errorf("hftrain: Rollout.MaxResponseTokens is %d, want > 0", r.MaxResponseTokens)
	}
	cfg := rollout.Config{
		Sampler: r.Sampler, Tokenizer: m.Tokenizer, Tools: r.Tools, Parser: r.Parser, Format: r.Format,
		MaxTurns: r.MaxTurns, MaxResponseTokens: r.MaxResponseTokens, MaxToolCalls: r.MaxToolCalls,
		ToolTimeout: r.ToolTimeout, MaxConcurrent: r.MaxConcurrent,
	}
	if cfg.Sampler == nil {
		cfg.Sampler, cfg.MaxTotalTokens = m.Policy, m.ContextLength()
	}
	tf := m.ToolFormat()
	if cfg.Parser == nil {
		cfg.Parser = tf.Parser
	}
	if cfg.Format == nil {
		cfg.Format = tf.Format
	}
	e, err := rollout.NewEngine(cfg)
	if err != nil {
		return nil, fmt.Errorf("hftrain: %w", err)
	}
	return e, nil
}

// ToolFormat is the tool-call format of the model's chat template
// (rollout.ToolFormatFromTemplate: Hermes for Qwen2.5 and Qwen3,
// Qwen3-Coder's XML, Llama 3's JSON, gpt-oss's harmony), and Hermes
// <tool_call> blocks with ChatML turns for a template it does not know.
// With Options.DisableThinking, ChatML turns open with
// NoThinkGenerationPrompt.
func (m *Model) ToolFormat() rollout.ToolFormat {
	tf, err := rollout.ToolFormatFromTemplate(m.Tokenizer.ChatTemplate())
	if err != nil {
		tf = rollout.ToolFormat{Name: rollout.FormatHermes, Parser: rollout.Hermes{}, Format: rollout.ChatML{}}
	}
	if f, ok := tf.Format.(rollout.ChatML); ok && m.noThinking {
		f.GenerationPrompt = NoThinkGenerationPrompt
		tf.Format = f
	}
	return tf
}

// NewTrainer returns the trainer of cfg over the model: parts as given,
// with what NewTrainer fills in where parts leaves it empty — the Policy
// (the model), the Engine (NewEngine(r); r is not used when parts.Engine
// is set) and the ContextLength (the model's). Prompts given as Text or
// Messages are rendered first (RenderPrompts with r's tools), so that
// the trainer checks every prompt against the context (see
// agentrl.TrainerParts.ContextLength). With cfg.LoRA, an empty
// LoRA.BaseModel names the model's folder.
func (m *Model) NewTrainer(ctx context.Context, cfg agentrl.TrainerConfig, r Rollout, parts agentrl.TrainerParts) (*agentrl.Trainer, error) {
	if parts.Policy == nil {
		parts.Policy = m.Policy
	}
	if parts.ContextLength == 0 {
		parts.ContextLength = m.ContextLength()
	}
	if cfg.LoRA != nil && cfg.LoRA.BaseModel == "" {
		lc := *cfg.LoRA
		lc.BaseModel = m.Dir
		cfg.LoRA = &lc
	}
	if parts.Engine == nil {
		e, err := m.NewEngine(r)
		if err != nil {
			return nil, err
		}
		parts.Engine = e
	}
	prompts, err := m.renderRest(ctx, parts.Prompts, r.Tools)
	if err != nil {
		return nil, err
	}
	parts.Prompts = prompts
	return agentrl.NewTrainer(cfg, parts)
}

// renderRest renders the prompts not given as Tokens, leaving out none:
// the trainer checks them against the context.
func (m *Model) renderRest(ctx context.Context, prompts []agentrl.Prompt, tools []tool.Tool) ([]agentrl.Prompt, error) {
	rendered := true
	for _, p := range prompts {
		rendered = rendered && len(p.Tokens) > 0
	}
	if rendered {
		return prompts, nil
	}
	opts := m.promptOptions(agentrl.PromptOptions{})
	opts.ContextTokens = 0 // the trainer leaves out, and counts, the prompts the context cannot hold
	out, _, err := agentrl.RenderPrompts(ctx, prompts, m.Tokenizer, tools, opts)
	if err != nil {
		return nil, fmt.Errorf("hftrain: TrainerParts.Prompts: %w", err)
	}
	return out, nil
}

// PromptLimit is the longest prompt, in tokens, that LoadPrompts and
// RenderPrompts keep with opts: opts.MaxPromptTokens() with the model's
// context filled in.
func (m *Model) PromptLimit(opts agentrl.PromptOptions) int {
	return m.promptOptions(opts).MaxPromptTokens()
}
