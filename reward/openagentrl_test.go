package reward

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/tool"
)

// sumExec is a fake executor whose candidates all print the sum of their
// two input numbers, except those containing "WRONG", which print 0.
func sumExec(t *testing.T) *fakeExec {
	return &fakeExec{t: t, behave: func(h harnessArgs) (tool.ExecResult, error) {
		if strings.Contains(h.src, "WRONG") {
			return report(h, "ok", "0\n", ""), nil
		}
		f := strings.Fields(h.stdin)
		return report(h, "ok", itoa(atoi(f[0])+atoi(f[1]))+"\n", ""), nil
	}}
}

func TestOpenAgentRL(t *testing.T) {
	const sumCode = "Here:\n```python\nprint(sum(map(int, input().split())))\n```"
	cases := []struct {
		name      string
		bonus     bool
		in        Input
		score     float64
		acc       bool
		execCalls int32  // harness runs: one per test case of sumSpec (3) when code tests run
		reason    string // a part of Output.Reason
	}{
		// Math: +1 right, −1 wrong (DefaultMathConfig).
		{"math right", false, Input{DataSource: "math_dapo", Response: `So \boxed{42}.`, GroundTruth: "42"}, 1, true, 0, ""},
		{"math wrong", false, Input{DataSource: "math_dapo", Response: `So \boxed{41}.`, GroundTruth: "42"}, -1, false, 0, ""},
		// strict_box_verify: a bare last number is not an answer (the
		// lenient verifier would take 42 and score +1).
		{"math strict", false, Input{DataSource: "aime2024", Response: "6 times 7 is 42", GroundTruth: "42"}, -1, false, 0, ""},
		// A source nobody classifies, without "code" in its name, is math.
		{"unknown source is math", false, Input{DataSource: "my_set", Response: `\boxed{7}`, GroundTruth: "7"}, 1, true, 0, ""},
		// Code: no code block scores −1 without running anything.
		{"code without a block", false, Input{DataSource: "livecodebench", Response: "print(3)", GroundTruth: sumSpec}, -1, false, 0,
			"no code block in the response"},
		{"code passes", false, Input{DataSource: "livecodebench", Response: sumCode, GroundTruth: sumSpec}, 1, true, 3, "passed all 3 tests"},
		// SourceKind does not know "skywork_code", but the name contains
		// "code", so the tests run: all 3 pass, score 3/3.
		{"name containing code", false, Input{DataSource: "Skywork_Code", Response: sumCode, GroundTruth: sumSpec}, 1, true, 3, "passed all 3 tests"},
		// Tool bonus (DefaultToolBonus): a wrong answer after Turns
		// assistant turns scores min(−0.6, −1 + 0.1·(Turns−1)).
		// Turns 3: −1 + 0.2 = −0.8.
		{"bonus on a wrong answer", true, Input{DataSource: "math_dapo", Response: `\boxed{41}`, GroundTruth: "42", Turns: 3}, -0.8, false, 0, ""},
		// Turns 9: −1 + 0.8 = −0.2, capped at −0.6.
		{"bonus capped", true, Input{DataSource: "math_dapo", Response: `\boxed{41}`, GroundTruth: "42", Turns: 9}, -0.6, false, 0, ""},
		// A right answer is not shaped: +1 whatever its turns.
		{"no bonus on a right answer", true, Input{DataSource: "math_dapo", Response: `\boxed{42}`, GroundTruth: "42", Turns: 9}, 1, true, 0, ""},
		// Without ToolBonus the turns do not matter.
		{"bonus off", false, Input{DataSource: "math_dapo", Response: `\boxed{41}`, GroundTruth: "42", Turns: 9}, -1, false, 0, ""},
		// A code response without a block is −1 and gets the bonus too:
		// Turns 2: −1 + 0.1 = −0.9.
		{"bonus on code without a block", true, Input{DataSource: "codecontests", Response: "no code", GroundTruth: sumSpec, Turns: 2}, -0.9, false, 0, ""},
		// Failing code tests score 0, which the bonus leaves alone (only
		// negative scores are shaped).
		{"failing code is not shaped", true, Input{DataSource: "codecontests", Response: "```python\nWRONG\n```", GroundTruth: sumSpec, Turns: 4}, 0, false, 3,
			"3 wrong_answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exec := sumExec(t)
			f, err := OpenAgentRL(OpenAgentRLConfig{Executor: exec, ToolBonus: c.bonus})
			require.NoError(t, err)
			out, err := f(context.Background(), c.in)
			require.NoError(t, err)
			assert.InDelta(t, c.score, out.Score, 1e-12, out.Reason)
			assert.Equal(t, c.acc, out.Acc)
			assert.Equal(t, c.execCalls, exec.calls.Load())
			assert.Contains(t, out.Reason, c.reason)
		})
	}
}

func TestOpenAgentRLWithoutExecutor(t *testing.T) {
	f, err := OpenAgentRL(OpenAgentRLConfig{})
	require.NoError(t, err)
	ctx := context.Background()

	out, err := f(ctx, Input{DataSource: "gsm8k", Response: `\boxed{5}`, GroundTruth: "5"})
	require.NoError(t, err)
	assert.Equal(t, 1.0, out.Score, "math needs no executor")

	out, err = f(ctx, Input{DataSource: "apps", Response: "I cannot", GroundTruth: sumSpec})
	require.NoError(t, err)
	assert.Equal(t, -1.0, out.Score, "no code block needs no executor either")

	_, err = f(ctx, Input{DataSource: "apps", Response: "```python\nprint(1)\n```", GroundTruth: sumSpec})
	require.ErrorIs(t, err, ErrConfig)
	assert.Contains(t, err.Error(), `data source "apps" needs code tests`)
}
