package reward

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cputime"
)

func TestMathVerifyOutput(t *testing.T) {
	cases := []struct {
		name, resp, gold string
		acc              bool
		pred             string
		reason           string
	}{
		{"exact", `\boxed{\frac{2}{4}}`, "0.5", true, `\frac{2}{4}`, "correct (exact, boxed)"},
		{"wrong", `\boxed{3}`, "4", false, "3", `wrong (exact, boxed): answer "3", gold "4"`},
		{"numeric", `\boxed{\cos 0}`, "1", true, `\cos 0`, "correct (exact, boxed)"},
		{"no answer", "no idea", "4", false, "", "no answer found in the response"},
		{"empty gold", `\boxed{3}`, " ", false, "", "gold answer is empty"},
		{"boxed gold", `\boxed{3}`, `so \boxed{3}`, true, "3", "correct"},
		{"choice", `\boxed{(B)}`, "B", true, "B", "correct: choice B (boxed)"},
		{"choice wrong", `\boxed{A}`, "B", false, "A", "wrong: choice A, gold B (boxed)"},
		{"unparseable gold", `\boxed{3}`, "a ? b", false, "3", "gold does not parse"},
		{"unparseable answer equal text", `\boxed{a ? b}`, "a ? b", true, "a ? b", "correct (text, boxed)"},
		{"too large", `\boxed{10^{10^{10^{10}}}}`, "1", false, "10^{10^{10^{10}}}", "too large for exact arithmetic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := MathVerify(context.Background(), c.resp, c.gold)
			assert.Equal(t, c.acc, out.Acc, out.Reason)
			if c.acc {
				assert.Equal(t, 1.0, out.Score)
			} else {
				assert.Equal(t, 0.0, out.Score)
			}
			assert.Equal(t, c.pred, out.Pred)
			assert.Contains(t, out.Reason, c.reason)
		})
	}
}

// TestMathVerifyPathological proves that the inputs the issue names return
// promptly with a clear Reason: an exponent tower, big factorials and
// 5000-deep nesting.
func TestMathVerifyPathological(t *testing.T) {
	deepParens := strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)
	deepFrac := strings.Repeat(`\frac{1}{`, 5000) + "2" + strings.Repeat("}", 5000)
	deepSqrt := strings.Repeat(`\sqrt{`, 5000) + "2" + strings.Repeat("}", 5000)
	cases := []struct {
		name, pred, gold string
		acc              bool
		reason           string
	}{
		{"tower", `10^{10^{10^{10}}}`, "5", false, "too large"},
		{"tower vs itself", `10^{10^{10^{10}}}`, `10^{10^{10^{10}}}`, true, "structure"},
		{"1000!", `1000!`, `1000!`, true, "exact"},
		{"1000! vs 999!", `1000!`, `999!`, false, "exact"},
		{"10^6!", `1000000!`, `5`, false, "too large"},
		{"5000-deep parens", deepParens, "1", false, "too long"},
		{"5000-deep frac", deepFrac, "1", false, "too long"},
		{"5000-deep sqrt", deepSqrt, "1", false, "too long"},
		{"300-deep parens", strings.Repeat("(", 300) + "1" + strings.Repeat(")", 300), "1", false, "nesting too deep"},
		{"power of a sum", `(1+\sqrt{2})^{100000}`, `1`, false, "wrong"},
		{"huge sci", `1e-999999999`, `0`, false, "wrong"},
		{"10k-deep frac", strings.Repeat(`\frac{1}{`, 10000) + "2" + strings.Repeat("}", 10000), "1", false, "too long"},
		{"1k-deep sqrt", strings.Repeat(`\sqrt{`, 1000) + "2" + strings.Repeat("}", 1000), "1", false, "nesting too deep"},
		{"10k unbalanced parens", strings.Repeat("(", 10000), "1", false, "too long"},
		{"1k unbalanced parens", strings.Repeat("(", 1000), "1", false, "nesting too deep"},
		{"x^x^x… 2000", strings.Repeat("x^", 2000) + "x", "1", false, "nesting too deep"},
		{"2^2^…^2 tower", strings.Repeat("2^", 30) + "2", "1", false, "too large"},
		{"10!!!!!!!", `10!!!!!!!`, "1", false, "too large"},
		{"10!!!!!!! vs itself", `10!!!!!!!`, `10!!!!!!!`, true, "structure"},
		// Identical answers whose expansion exceeds the step budget are
		// still the same answer.
		{"budget, identical", `(x+y+z+w+1)^{60}`, `(x+y+z+w+1)^{60}`, true, "identical"},
		{"budget, different", `(x+y+z+w+1)^{60}`, `(x+y+z+w+2)^{60}`, false, "step budget"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, used := verifyUntimed(`\boxed{`+c.pred+`}`, c.gold)
			// The caps, not MathVerify's deadline, bound the work.
			require.Less(t, used, DefaultMathTimeout)
			assert.Equal(t, c.acc, out.Acc, out.Reason)
			assert.Contains(t, out.Reason, c.reason)
		})
	}
}

// verifyUntimed is MathVerify without its deadline, and the CPU time
// it used: the verdict then does not depend on how loaded the machine
// is (a check cut by the deadline reads "timeout"), and the CPU time
// bounds the work as the deadline would, without the other processes'
// share of the wall clock.
func verifyUntimed(response, gold string) (Output, time.Duration) {
	start := cputime.Self()
	out := mathVerify(context.Background(), response, gold, true)
	return out, cputime.Self() - start
}

// TestMathVerifyHugeResponse: megabyte responses return promptly with a
// Reason. 100k boxes side by side once took 46 s (a quadratic join).
func TestMathVerifyHugeResponse(t *testing.T) {
	cases := []struct {
		name, resp string
		acc        bool
		reason     string
	}{
		{"1 MB prose, box at the end", strings.Repeat("word ", 200000) + `\boxed{5}`, true, "correct"},
		{"1 MB prose, no answer", strings.Repeat("word ", 210000), false, "no answer"},
		{"1 MB of digits", strings.Repeat("1", 1<<20), false, "too long"},
		{"100k boxes", strings.Repeat(`\boxed{5}, `, 100000), true, "correct"},
		{"1 MB of dollars", strings.Repeat("$", 1<<20), false, "no answer"},
		{"1 MB of open braces", `\boxed{` + strings.Repeat("{", 1<<20), false, "no answer"},
		{"150k <think>", strings.Repeat("<think>", 150000) + "</think>5", true, "correct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, used := verifyUntimed(c.resp, "5")
			require.Less(t, used, DefaultMathTimeout)
			assert.Equal(t, c.acc, out.Acc, out.Reason)
			assert.Contains(t, out.Reason, c.reason)
		})
	}
}

// TestMathVerifyDeadline: an expired context yields an undecided wrong
// verdict that says so.
func TestMathVerifyDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	out := MathVerify(ctx, `\boxed{1}`, "1")
	assert.False(t, out.Acc)
	assert.Contains(t, out.Reason, "deadline exceeded")
}

func TestMathFunc(t *testing.T) {
	f, err := MathFunc(DefaultMathConfig())
	require.NoError(t, err)
	ctx := context.Background()
	out, err := f(ctx, Input{Response: `\boxed{2}`, GroundTruth: "2"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, out.Score)
	out, err = f(ctx, Input{Response: `\boxed{3}`, GroundTruth: "2"})
	require.NoError(t, err)
	assert.Equal(t, -1.0, out.Score)
	out, err = f(ctx, Input{Response: `nothing`, GroundTruth: "2"})
	require.NoError(t, err)
	assert.Equal(t, -1.0, out.Score)

	// Strict extraction ignores a bare trailing number.
	strict, err := MathFunc(MathConfig{Correct: 1, Wrong: 0, Strict: true})
	require.NoError(t, err)
	out, err = strict(ctx, Input{Response: "so 2", GroundTruth: "2"})
	require.NoError(t, err)
	assert.Equal(t, 0.0, out.Score)
	assert.Contains(t, out.Reason, "no answer")

	// A cancelled context is an error, not a score.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = f(cctx, Input{Response: `\boxed{2}`, GroundTruth: "2"})
	require.ErrorIs(t, err, context.Canceled)

	// The zero MathConfig scores as Open-AgentRL (+1, −1); one score set
	// keeps the other at zero.
	for _, c := range []struct {
		cfg          MathConfig
		right, wrong float64
	}{{MathConfig{}, 1, -1}, {MathConfig{Correct: 1}, 1, 0}, {MathConfig{Wrong: -2}, 0, -2}} {
		g, err := MathFunc(c.cfg)
		require.NoError(t, err)
		out, err := g(ctx, Input{Response: `\boxed{2}`, GroundTruth: "2"})
		require.NoError(t, err)
		assert.Equal(t, c.right, out.Score, "%+v right", c.cfg)
		out, err = g(ctx, Input{Response: `\boxed{3}`, GroundTruth: "2"})
		require.NoError(t, err)
		assert.Equal(t, c.wrong, out.Score, "%+v wrong", c.cfg)
	}

	_, err = MathFunc(MathConfig{Correct: -1, Wrong: 1})
	require.ErrorIs(t, err, ErrConfig)
	_, err = MathFunc(MathConfig{Correct: 1, Timeout: -time.Second})
	require.ErrorIs(t, err, ErrConfig)
}
