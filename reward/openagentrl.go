package reward

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentrl/agentrl/tool"
)

// OpenAgentRLConfig configures OpenAgentRL. The zero value scores math
// without the tool bonus and cannot run code tests.
type OpenAgentRLConfig struct {
	// Executor runs the code tests of code sources (see CodeFunc): the
	// local tool.Sandbox or a tool.SandboxFusion client. Nil makes scoring
	// a code response an error (a code source whose response has no code
	// block still scores −1).
	Executor tool.Executor
	// ToolBonus shapes wrong answers with DefaultToolBonus: 0.1 per tool
	// round, capped at −0.6.
	ToolBonus bool
}

// OpenAgentRL returns the reward of Open-AgentRL's GRPO-TCR runs
// (recipe/demystify/reward.py, compute_score), routed by
// Input.DataSource:
//
//   - code: sources SourceKind calls code, and any other whose name
//     contains "code" (Open-AgentRL's rule), run the response's last
//     Python block against the tests in the ground truth on cfg.Executor;
//     the score is the fraction of tests passed, and −1 without a code
//     block;
//   - math: everything else, checked by the math verifier with strict
//     extraction (strict_box_verify: a \boxed answer, an answer phrase or
//     a bold final line, never a stray last number), +1 right and −1
//     wrong.
//
// With cfg.ToolBonus, WithToolBonus(DefaultToolBonus()) shapes the
// result.
func OpenAgentRL(cfg OpenAgentRLConfig) (Func, error) {
	mc := DefaultMathConfig()
	mc.Strict = true
	mathF, err := MathFunc(mc)
	if err != nil {
		return nil, err
	}
	var tests Func
	if cfg.Executor != nil {
		if tests, err = CodeFunc(CodeConfig{Executor: cfg.Executor}); err != nil {
			return nil, err
		}
	}
	code := func(ctx context.Context, in Input) (Output, error) {
		if _, ok := ExtractCode(in.Response); !ok {
			return Output{Score: mc.Wrong, Reason: "no code block in the response"}, nil
		}
		if tests == nil {
			return Output{}, fmt.Errorf("%w: data source %q needs code tests but OpenAgentRLConfig.Executor is nil", ErrConfig, in.DataSource)
		}
		return tests(ctx, in)
	}
	fallback := func(ctx context.Context, in Input) (Output, error) {
		if strings.Contains(strings.ToLower(in.DataSource), "code") {
			return code(ctx, in)
		}
		return mathF(ctx, in)
	}
	f := Router{Math: mathF, Code: code, Default: fallback}.Func()
	if cfg.ToolBonus {
		return WithToolBonus(f, DefaultToolBonus())
	}
	return f, nil
}
