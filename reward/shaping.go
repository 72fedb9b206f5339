package reward

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"

	"gonum.org/v1/gonum/stat"
)

// OverlongConfig configures DAPO's soft overlong punishment. Its zero value
// is not usable: MaxLen and Buffer are required, because the budget is the
// rollout engine's (a Trainer fills MaxLen in from it) and the zone is a
// choice against that budget (DAPO: 4096 tokens of 20480). A zero Factor
// means DAPO's 1, and a zero ExcludeToolTokens counts tool tokens, as
// verl does.
type OverlongConfig struct {
	// MaxLen is the response length limit in tokens (verl's
	// data.max_response_length); required.
	MaxLen int
	// Buffer is the length of the punishment zone before MaxLen
	// (verl's overlong_buffer.len); required, > 0.
	Buffer int
	// Factor is the penalty at MaxLen (verl's
	// overlong_buffer.penalty_factor). 0 means DAPO's 1: a factor of 0
	// would punish nothing (leave the shaping out for that).
	Factor float64
	// ExcludeToolTokens counts only model-generated tokens. By default tool
	// results inside the response count too, as in verl, where the
	// response span of a multi-turn rollout holds both and MaxLen bounds
	// that whole span.
	ExcludeToolTokens bool
}

// Validate reports an unusable configuration.
func (c OverlongConfig) Validate() error {
	switch {
	case c.Buffer <= 0:
		return fmt.Errorf("%w: OverlongConfig.Buffer %d must be positive", ErrConfig, c.Buffer)
	case c.MaxLen < c.Buffer:
		return fmt.Errorf("%w: OverlongConfig.MaxLen %d is below Buffer %d", ErrConfig, c.MaxLen, c.Buffer)
	case c.Factor < 0 || math.IsNaN(c.Factor) || math.IsInf(c.Factor, 0):
		return fmt.Errorf("%w: OverlongConfig.Factor %g must be finite and non-negative", ErrConfig, c.Factor)
	}
	return nil
}

// Length returns the token count that the penalty applies to.
func (c OverlongConfig) Length(in Input) int {
	if c.ExcludeToolTokens {
		return in.ResponseTokens
	}
	return in.ResponseTokens + in.ToolTokens
}

// OverlongPenalty is DAPO's soft overlong punishment (verl
// recipe/dapo/dapo_ray_trainer and workers/reward_manager/dapo.py):
// expected = MaxLen − Buffer, penalty = min(−(L − expected)/Buffer · Factor, 0),
// so 0 up to expected, falling linearly to −Factor at MaxLen (and beyond).
// A zero Factor is DAPO's 1.
func OverlongPenalty(c OverlongConfig, length int) float64 {
	expected := c.MaxLen - c.Buffer
	exceed := float64(length - expected)
	return math.Min(-exceed/float64(c.Buffer)*c.factor(), 0)
}

// defaultOverlongFactor is DAPO's penalty at MaxLen, which a zero
// OverlongConfig.Factor stands for.
const defaultOverlongFactor = 1

func (c OverlongConfig) factor() float64 {
	if c.Factor == 0 {
		return defaultOverlongFactor
	}
	return c.Factor
}

// WithOverlong adds the overlong penalty to f's score, recorded in
// Parts["overlong"].
func WithOverlong(f Func, c OverlongConfig) (Func, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return func(ctx context.Context, in Input) (Output, error) {
		out, err := f(ctx, in)
		if err != nil {
			return out, err
		}
		p := OverlongPenalty(c, c.Length(in))
		out.Score += p
		out.addPart("overlong", p)
		return out, nil
	}, nil
}

// ToolBonusConfig configures WithToolBonus. The zero value means
// DefaultToolBonus, Open-AgentRL's shaping.
type ToolBonusConfig struct {
	// Cap is the highest score a wrong answer can reach (−0.6).
	Cap float64
	// PerTurn is the bonus per assistant turn beyond BaseTurns (0.1).
	PerTurn float64
	// BaseTurns is the number of assistant turns that earn nothing (1: an
	// answer without any tool round).
	BaseTurns int
}

// DefaultToolBonus is the zero ToolBonusConfig's values spelled out:
// Open-AgentRL's shaping for a wrong answer
// (recipe/demystify/reward.py compute_score, after verl's
// recipe/retool): score = min(−0.6, score + 0.1·(num_turns − 2)/2).
//
// verl's tool agent loop counts num_turns = user_turns + assistant_turns
// + 1, where user_turns is the number of tool-result rounds; a trajectory
// that ends in an answer has assistant_turns = user_turns + 1, so
// num_turns = 2·Turns and (num_turns − 2)/2 = Turns − 1: 0.1 per tool
// round. Hence PerTurn 0.1 and BaseTurns 1 over Input.Turns (assistant
// turns).
func DefaultToolBonus() ToolBonusConfig {
	return ToolBonusConfig{Cap: -0.6, PerTurn: 0.1, BaseTurns: 1}
}

// WithToolBonus raises a negative score of a wrong answer by PerTurn for
// each assistant turn beyond BaseTurns, never above Cap: a failed attempt
// that kept using its tools is punished less than one that gave up, but
// never reaches the score of a right one. As in the reference, only
// negative scores are shaped (a partial code score of 0.5 or a Wrong
// score of 0 stays as it is), the bonus is never negative (Turns left at 0
// by a single-turn pipeline earns nothing), and correct answers are
// untouched. Apply it to the raw answer score, before WithOverlong, as
// verl adds the overlong penalty after compute_score. The bonus is
// recorded in Parts["tool_bonus"].
func WithToolBonus(f Func, c ToolBonusConfig) (Func, error) {
	if c == (ToolBonusConfig{}) {
		c = DefaultToolBonus()
	}
	if math.IsNaN(c.Cap) || math.IsInf(c.Cap, 0) || math.IsNaN(c.PerTurn) || math.IsInf(c.PerTurn, 0) ||
		c.PerTurn < 0 || c.BaseTurns < 0 {
		return nil, fmt.Errorf("%w: ToolBonusConfig %+v", ErrConfig, c)
	}
	return func(ctx context.Context, in Input) (Output, error) {
		out, err := f(ctx, in)
		if err != nil || out.Acc || !(out.Score < 0) {
			return out, err
		}
		bonus := c.PerTurn * float64(max(in.Turns-c.BaseTurns, 0))
		shaped := math.Min(c.Cap, out.Score+bonus)
		out.addPart("tool_bonus", shaped-out.Score)
		out.Score = shaped
		return out, nil
	}, nil
}

// WithToolRewards adds weight times the mean of the rewards the tools
// returned during the trajectory (Input.ToolRewards) to f's score,
// recorded in Parts["tool"]. A trajectory without tool rewards gets 0.
func WithToolRewards(f Func, weight float64) (Func, error) {
	if math.IsNaN(weight) || math.IsInf(weight, 0) {
		return nil, fmt.Errorf("%w: tool reward weight %g", ErrConfig, weight)
	}
	return func(ctx context.Context, in Input) (Output, error) {
		out, err := f(ctx, in)
		if err != nil {
			return out, err
		}
		for i, r := range in.ToolRewards {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return Output{}, fmt.Errorf("reward: tool reward %d is %g", i, r)
			}
		}
		v := 0.0
		if len(in.ToolRewards) > 0 {
			v = weight * stat.Mean(in.ToolRewards, nil)
		}
		out.Score += v
		out.addPart("tool", v)
		return out, nil
	}, nil
}

// FormatConfig configures FormatFunc. The zero value requires nothing and
// scores 1 for a well-formed response and 0 for an ill-formed one (so
// every response scores 1 until a requirement is set).
type FormatConfig struct {
	// Reward and Penalty are the scores for a well- and an ill-formed
	// response. When both are zero they are 1 and 0, the score then
	// matching Acc (scores that cannot tell the two apart are no
	// configuration); set either to choose your own, such as Reward 0.1
	// and Penalty −0.1. One set keeps the other at zero.
	Reward, Penalty float64
	// RequireBoxed asks for a final answer in \boxed{…} with balanced
	// braces, exactly once in the text after the last </think>.
	RequireBoxed bool
	// RequireCode asks for at least one fenced code block.
	RequireCode bool
	// Pattern, when set, must match the response.
	Pattern *regexp.Regexp
	// BalancedTags lists tag names ("think", "tool_call") whose opening and
	// closing tags must pair up in order.
	BalancedTags []string
}

// FormatFunc returns a Func that checks the shape of the response, not its
// correctness: Score is cfg.Reward when every requirement holds and
// cfg.Penalty otherwise (1 and 0 when both are zero), with the first
// broken requirement in Reason. Acc reports that the format is right.
func FormatFunc(cfg FormatConfig) Func {
	if cfg.Reward == 0 && cfg.Penalty == 0 {
		cfg.Reward = 1
	}
	return func(ctx context.Context, in Input) (Output, error) {
		if err := ctx.Err(); err != nil {
			return Output{}, err
		}
		if why := formatProblem(cfg, in.Response); why != "" {
			return Output{Score: cfg.Penalty, Reason: "format: " + why}, nil
		}
		return Output{Score: cfg.Reward, Acc: true, Reason: "format ok"}, nil
	}
}

func formatProblem(cfg FormatConfig, resp string) string {
	if cfg.RequireBoxed {
		final := resp
		if i := strings.LastIndex(resp, "</think>"); i >= 0 {
			final = resp[i+len("</think>"):]
		}
		n := 0
		for i := 0; i < len(final); {
			j := strings.Index(final[i:], `\boxed`)
			if j < 0 {
				break
			}
			b, ok := readBoxed(final, i+j, i+j+len(`\boxed`))
			if !ok {
				return fmt.Sprintf("unbalanced \\boxed at byte %d", i+j)
			}
			n++
			i = b.end
		}
		if n != 1 {
			return fmt.Sprintf("want exactly one \\boxed answer, found %d", n)
		}
	}
	if cfg.RequireCode {
		if _, ok := ExtractCode(resp); !ok {
			return "no fenced code block"
		}
	}
	if cfg.Pattern != nil && !cfg.Pattern.MatchString(resp) {
		return "response does not match " + cfg.Pattern.String()
	}
	for _, tag := range cfg.BalancedTags {
		open, closeTag := "<"+tag+">", "</"+tag+">"
		depth := 0
		for i := 0; i < len(resp); {
			o := strings.Index(resp[i:], open)
			c := strings.Index(resp[i:], closeTag)
			switch {
			case o < 0 && c < 0:
				i = len(resp)
			case c < 0 || (o >= 0 && o < c):
				depth++
				if depth > 1 {
					return fmt.Sprintf("nested %s at byte %d", open, i+o)
				}
				i += o + len(open)
			default:
				depth--
				if depth < 0 {
					return fmt.Sprintf("%s without %s at byte %d", closeTag, open, i+c)
				}
				i += c + len(closeTag)
			}
		}
		if depth != 0 {
			return fmt.Sprintf("unclosed %s", open)
		}
	}
	return ""
}
