package reward

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentrl/agentrl/reward/internal/mathexpr"
)

// DefaultMathTimeout bounds one MathVerify call when the context carries
// no earlier deadline.
const DefaultMathTimeout = 2 * time.Second

// MathVerify extracts the final answer from response (see ExtractAnswer,
// with fallbacks) and decides whether it equals gold. Score is 1 for a
// correct answer and 0 otherwise; Reason says which rule decided, or why
// nothing could be decided.
//
// Equivalence: exact arithmetic over the rationals extended with radicals,
// i, π and e and free symbols (polynomials and rational functions, so
// 2\sqrt{2} = \sqrt{8} and (x+1)^2 = x^2+2x+1); numeric evaluation at a
// relative tolerance of 1e-9 only where functions such as sin or ln leave
// the exact route undecided; structural rules for sets (unordered), tuples
// (ordered), intervals, unions, matrices, equations and inequalities
// ("x = 5" and "f(x) = 5" match 5; "a = 3, b = 2" keeps its order against
// "2, 3"; "x < 1 or x > 2" is a union of intervals); text for word
// answers; letters for multiple choice, with AMC's "\textbf{(A) }8"
// matching either A or 8. Decimals are exact rationals, so 0.333 does not
// match 1/3 and 3.14 does not match π, while 0.\overline{3} is 1/3. A
// degree sign inside sin, cos or tan converts to radians; elsewhere it is
// dropped (45^\circ matches 45). A gold answer holding a GSM8K solution
// is read after its last "####".
//
// The check runs under ctx and at most DefaultMathTimeout; input size,
// nesting, number size and step counts are capped, so pathological input
// such as 10^{10^{10^{10}}} returns promptly with a Reason.
func MathVerify(ctx context.Context, response, gold string) Output {
	ctx, cancel := context.WithTimeout(ctx, DefaultMathTimeout)
	defer cancel()
	return mathVerify(ctx, response, gold, true)
}

func mathVerify(ctx context.Context, response, gold string, fallbacks bool) Output {
	if g, _, ok := ExtractAnswer(gold, false); ok && strings.Contains(gold, `\boxed`) {
		gold = g
	}
	// A raw GSM8K answer field: the worked solution, then "#### 72".
	if i := strings.LastIndex(gold, "####"); i >= 0 {
		gold = gold[i+len("####"):]
	}
	gold = strings.TrimSpace(gold)
	if gold == "" {
		return Output{Reason: "gold answer is empty"}
	}
	pred, method, ok := ExtractAnswer(response, fallbacks)
	if !ok {
		return Output{Reason: "no answer found in the response"}
	}
	out := Output{Pred: pred}
	if c := choiceLetter(gold); c != 0 && len(strings.TrimSpace(strings.Trim(gold, "(){}.$"))) <= 12 {
		if p := choiceLetter(pred); p != 0 {
			out.Pred = string(p)
			if p == c {
				out.Score, out.Acc = 1, true
				out.Reason = fmt.Sprintf("correct: choice %c (%s)", c, method)
			} else {
				out.Reason = fmt.Sprintf("wrong: choice %c, gold %c (%s)", p, c, method)
			}
			return out
		}
	}
	// AMC style "\textbf{(A) }8": a choice label with its value. A label
	// on both sides decides by letter; otherwise the values compare.
	gl, gv := choiceWithValue(gold)
	pl, pv := choiceWithValue(pred)
	cmpGold, cmpPred := gold, pred
	switch {
	case gl != 0 && (pl != 0 || choiceLetter(pred) != 0):
		p := pl
		if p == 0 {
			p = choiceLetter(pred)
		}
		out.Pred = string(p)
		if p == gl {
			out.Score, out.Acc = 1, true
			out.Reason = fmt.Sprintf("correct: choice %c (%s)", gl, method)
		} else {
			out.Reason = fmt.Sprintf("wrong: choice %c, gold %c (%s)", p, gl, method)
		}
		return out
	case gl != 0:
		cmpGold = gv
	case pl != 0:
		cmpPred = pv
	}
	v, err := equivalentWithUnits(ctx, cmpGold, cmpPred)
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			out.Reason = "undecided: deadline exceeded while comparing " + quote(pred) + " with " + quote(gold)
		case errors.Is(err, context.Canceled):
			out.Reason = "undecided: cancelled"
		default:
			out.Reason = "undecided: " + err.Error()
		}
		return out
	}
	note := ""
	if v.Note != "" {
		note = "; " + v.Note
	}
	if v.Equal {
		out.Score, out.Acc = 1, true
		out.Reason = fmt.Sprintf("correct (%s, %s)%s", v.Method, method, note)
	} else {
		out.Reason = fmt.Sprintf("wrong (%s, %s): answer %s, gold %s%s", v.Method, method, quote(pred), quote(gold), note)
	}
	return out
}

// choiceLabel matches a parenthesised choice label that opens an answer:
// "(A)", "\textbf{(A)}", "\text{(B) }", "\mathrm{(C)}".
var choiceLabel = regexp.MustCompile(`^\s*(?:\\(?:textbf|text|mathrm|mathbf)\s*\{\s*)?\(([A-J])\)\s*(\}?)`)

// choiceWithValue splits "\textbf{(A) }8" into the letter A and the value
// "8". It returns 0 when s does not start with a label or has no value
// after it.
func choiceWithValue(s string) (byte, string) {
	m := choiceLabel.FindStringSubmatchIndex(s)
	if m == nil {
		return 0, ""
	}
	rest := s[m[1]:]
	if m[4] == m[5] && strings.HasPrefix(s[m[0]:], `\`) {
		// "\text{(B) 12}": the value sits inside the braces.
		rest = strings.TrimSuffix(strings.TrimSpace(rest), "}")
	}
	for {
		before := rest
		rest = strings.TrimSpace(rest)
		for _, cut := range []string{`\ `, `\quad`, `\qquad`, `\,`, `\;`, "~", "$"} {
			rest = strings.TrimPrefix(rest, cut)
		}
		if rest == before {
			break
		}
	}
	if rest == "" {
		return 0, ""
	}
	return s[m[2]], rest
}

// unitTail matches trailing plain-text units: "5 cm", "12 dollars", "3 sq units".
var unitTail = regexp.MustCompile(`^(.*[\d}).])\s*(?:[a-zA-Z]{2,}\.?\s*){1,3}$`)

// equivalentWithUnits compares, and when that fails retries without a
// trailing word unit on either side.
func equivalentWithUnits(ctx context.Context, gold, pred string) (mathexpr.Verdict, error) {
	v, err := mathexpr.Equivalent(ctx, gold, pred)
	if err != nil || v.Equal {
		return v, err
	}
	g2, p2 := stripUnits(gold), stripUnits(pred)
	if g2 == gold && p2 == pred {
		return v, nil
	}
	v2, err := mathexpr.Equivalent(ctx, g2, p2)
	if err != nil || v2.Equal {
		return v2, err
	}
	return v, nil
}

func stripUnits(s string) string {
	s = strings.ReplaceAll(s, "$", "")
	if m := unitTail.FindStringSubmatch(s); m != nil && !strings.Contains(s, `\`) {
		for _, w := range strings.Fields(strings.ToLower(s[len(m[1]):])) {
			if mathUnitWords[strings.TrimSuffix(w, ".")] {
				return s // "2 pi" is 2π, not 2 with a unit
			}
		}
		return strings.TrimSpace(m[1])
	}
	return s
}

// mathUnitWords are plain-text words that are mathematics, not units.
var mathUnitWords = map[string]bool{
	"pi": true, "sqrt": true, "ln": true, "log": true, "exp": true, "sin": true, "cos": true, "tan": true,
	"sec": true, "csc": true, "cot": true, "infinity": true, "infty": true, "inf": true, "oo": true,
	"arcsin": true, "arccos": true, "arctan": true, "mod": true, "sinh": true, "cosh": true, "tanh": true,
}

func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// MathConfig configures MathFunc. The zero value is Open-AgentRL's: +1
// for a right answer, −1 for a wrong one, extraction fallbacks on,
// DefaultMathTimeout.
type MathConfig struct {
	// Correct and Wrong are the scores for a right and a wrong (or
	// missing) answer. When both are zero they are Open-AgentRL's +1 and
	// −1 (scores that cannot tell right from wrong are no configuration);
	// set either to choose your own, such as Correct 1 and Wrong 0.
	Correct, Wrong float64
	// Strict disables the last-$…$ and last-number fallbacks of answer
	// extraction: only \boxed, answer phrases and a bold final line count.
	Strict bool
	// Timeout bounds one check; zero means DefaultMathTimeout.
	Timeout time.Duration
}

// DefaultMathConfig returns the zero MathConfig's values spelled out:
// Open-AgentRL's scores, +1 right and −1 wrong, with extraction fallbacks
// on.
func DefaultMathConfig() MathConfig {
	return MathConfig{Correct: 1, Wrong: -1}
}

// MathFunc returns a Func that scores in.Response against in.GroundTruth
// with MathVerify and maps the verdict to cfg's scores.
func MathFunc(cfg MathConfig) (Func, error) {
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("%w: MathConfig.Timeout %v is negative", ErrConfig, cfg.Timeout)
	}
	if cfg.Correct == 0 && cfg.Wrong == 0 {
		cfg.Correct, cfg.Wrong = DefaultMathConfig().Correct, DefaultMathConfig().Wrong
	}
	if cfg.Correct < cfg.Wrong {
		return nil, fmt.Errorf("%w: MathConfig.Correct %g below Wrong %g", ErrConfig, cfg.Correct, cfg.Wrong)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultMathTimeout
	}
	return func(ctx context.Context, in Input) (Output, error) {
		if err := ctx.Err(); err != nil {
			return Output{}, err
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		out := mathVerify(cctx, in.Response, in.GroundTruth, !cfg.Strict)
		if err := ctx.Err(); err != nil {
			return Output{}, err
		}
		if out.Acc {
			out.Score = cfg.Correct
		} else {
			out.Score = cfg.Wrong
		}
		return out, nil
	}, nil
}
