package reward

import (
	"context"
	"math"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// constFunc scores every input the same.
func constFunc(score float64, acc bool) Func {
	return func(ctx context.Context, in Input) (Output, error) {
		return Output{Score: score, Acc: acc, Pred: "p", Reason: "const"}, nil
	}
}

func TestOverlongPenalty(t *testing.T) {
	// MaxLen 20480, Buffer 4096, Factor 1 (DAPO's setting): expected = 16384.
	c := OverlongConfig{MaxLen: 20480, Buffer: 4096, Factor: 1}
	cases := []struct {
		length int
		want   float64
	}{
		{0, 0},
		{16384, 0},           // exactly expected: no penalty
		{16385, -1.0 / 4096}, // one token over
		{18432, -0.5},        // (18432−16384)/4096 = 0.5
		{20480, -1},          // at MaxLen: −Factor
		{24576, -2},          // beyond MaxLen the line continues: (24576−16384)/4096 = 2
	}
	for _, k := range cases {
		assert.InDelta(t, k.want, OverlongPenalty(c, k.length), 1e-15, "L=%d", k.length)
	}
	c.Factor = 0.5
	assert.InDelta(t, -0.25, OverlongPenalty(c, 18432), 1e-15)
}

func TestOverlongLength(t *testing.T) {
	in := Input{ResponseTokens: 100, ToolTokens: 40}
	assert.Equal(t, 140, OverlongConfig{}.Length(in), "verl counts tool tokens by default")
	assert.Equal(t, 100, OverlongConfig{ExcludeToolTokens: true}.Length(in))
}

func TestWithOverlong(t *testing.T) {
	f, err := WithOverlong(constFunc(1, true), OverlongConfig{MaxLen: 100, Buffer: 20, Factor: 1})
	require.NoError(t, err)
	// L = 90 + 0 tool tokens: (90 − 80)/20 = 0.5 → score 1 − 0.5.
	out, err := f(context.Background(), Input{ResponseTokens: 90})
	require.NoError(t, err)
	assert.InDelta(t, 0.5, out.Score, 1e-15)
	assert.InDelta(t, -0.5, out.Parts["overlong"], 1e-15)
	assert.True(t, out.Acc, "shaping does not change correctness")

	// Factor 0 is DAPO's 1: the same −0.5 at L = 90, −1 at MaxLen; a set
	// Factor of 0.5 halves both.
	g, err := WithOverlong(constFunc(1, true), OverlongConfig{MaxLen: 100, Buffer: 20})
	require.NoError(t, err)
	out, err = g(context.Background(), Input{ResponseTokens: 90})
	require.NoError(t, err)
	assert.InDelta(t, -0.5, out.Parts["overlong"], 1e-15)
	assert.InDelta(t, -1, OverlongPenalty(OverlongConfig{MaxLen: 100, Buffer: 20}, 100), 1e-15)
	assert.InDelta(t, -0.5, OverlongPenalty(OverlongConfig{MaxLen: 100, Buffer: 20, Factor: 0.5}, 100), 1e-15)
	assert.InDelta(t, -0.25, OverlongPenalty(OverlongConfig{MaxLen: 100, Buffer: 20, Factor: 0.5}, 90), 1e-15)

	for _, bad := range []OverlongConfig{
		{MaxLen: 100, Buffer: 0, Factor: 1},
		{},
		{MaxLen: 10, Buffer: 20, Factor: 1},
		{MaxLen: 100, Buffer: 20, Factor: -1},
		{MaxLen: 100, Buffer: 20, Factor: math.NaN()},
	} {
		_, err := WithOverlong(constFunc(0, false), bad)
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
}

func TestWithToolBonus(t *testing.T) {
	// Reference: Open-AgentRL recipe/demystify/reward.py (verl recipe/retool):
	// if score < 0: score = min(−0.6, score + 0.1·(num_turns − 2)/2), with
	// verl's num_turns = user_turns + assistant_turns + 1 = 2·Turns for a
	// trajectory of Turns assistant turns that ends in an answer.
	cases := []struct {
		name  string
		score float64
		acc   bool
		turns int
		want  float64
	}{
		{"wrong, no tool", -1, false, 1, -1},         // num_turns 2: −1 + 0 = −1
		{"wrong, 1 tool round", -1, false, 2, -0.9},  // num_turns 4: −1 + 0.1·1
		{"wrong, 3 tool rounds", -1, false, 4, -0.7}, // num_turns 8: −1 + 0.1·3
		{"wrong, 20 turns", -1, false, 20, -0.6},     // −1 + 1.9 = 0.9 → capped at −0.6
		{"turns unknown", -1, false, 0, -1},          // Turns 0 earns nothing, never a penalty
		{"right, 20 turns", 1, true, 20, 1},          // correct answers untouched
		{"wrong, score 0", 0, false, 10, 0},          // reference shapes only score < 0
		{"partial code", 0.5, false, 10, 0.5},        // a partial pass fraction stays
	}
	for _, c := range cases {
		f, err := WithToolBonus(constFunc(c.score, c.acc), DefaultToolBonus())
		require.NoError(t, err)
		// The zero ToolBonusConfig is the default one.
		zero, err := WithToolBonus(constFunc(c.score, c.acc), ToolBonusConfig{})
		require.NoError(t, err)
		zout, err := zero(context.Background(), Input{Turns: c.turns})
		require.NoError(t, err)
		assert.InDelta(t, c.want, zout.Score, 1e-12, c.name)
		out, err := f(context.Background(), Input{Turns: c.turns})
		require.NoError(t, err)
		assert.InDelta(t, c.want, out.Score, 1e-12, c.name)
		if c.score < 0 && !c.acc {
			assert.InDelta(t, c.want-c.score, out.Parts["tool_bonus"], 1e-12, c.name)
		} else {
			assert.Nil(t, out.Parts, c.name)
		}
	}
	for _, bad := range []ToolBonusConfig{{Cap: math.NaN()}, {PerTurn: math.Inf(1)}, {PerTurn: -0.1}, {BaseTurns: -1}} {
		_, err := WithToolBonus(constFunc(0, false), bad)
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
}

func TestWithToolRewards(t *testing.T) {
	f, err := WithToolRewards(constFunc(1, true), 0.5)
	require.NoError(t, err)
	// mean(0.2, 0.6, 1.0) = 0.6; 0.5 · 0.6 = 0.3
	out, err := f(context.Background(), Input{ToolRewards: []float64{0.2, 0.6, 1.0}})
	require.NoError(t, err)
	assert.InDelta(t, 1.3, out.Score, 1e-12)
	assert.InDelta(t, 0.3, out.Parts["tool"], 1e-12)

	out, err = f(context.Background(), Input{})
	require.NoError(t, err)
	assert.Equal(t, 1.0, out.Score)

	_, err = f(context.Background(), Input{ToolRewards: []float64{1, math.Inf(1)}})
	require.ErrorContains(t, err, "tool reward 1")
	_, err = WithToolRewards(constFunc(0, false), math.NaN())
	require.ErrorIs(t, err, ErrConfig)
}

func TestFormatFunc(t *testing.T) {
	cfg := FormatConfig{Reward: 0.1, Penalty: -0.1, RequireBoxed: true, BalancedTags: []string{"think", "tool_call"}}
	f := FormatFunc(cfg)
	cases := []struct {
		name, resp string
		ok         bool
		reason     string
	}{
		{"good", `<think>hmm</think>so \boxed{3}`, true, "format ok"},
		{"two boxes", `\boxed{3} or \boxed{4}`, false, "found 2"},
		{"no box", `so 3`, false, "found 0"},
		{"box only in think", `<think>\boxed{3}</think>so 3`, false, "found 0"},
		{"unbalanced box", `\boxed{3`, false, "unbalanced"},
		{"unclosed think", `<think>\boxed{3}`, false, "unclosed <think>"},
		{"stray close", `</tool_call>\boxed{3}`, false, "</tool_call> without <tool_call>"},
		{"nested", `<think><think></think></think>\boxed{1}`, false, "nested <think>"},
	}
	for _, c := range cases {
		out, err := f(context.Background(), Input{Response: c.resp})
		require.NoError(t, err)
		assert.Equal(t, c.ok, out.Acc, c.name)
		if c.ok {
			assert.Equal(t, 0.1, out.Score, c.name)
		} else {
			assert.Equal(t, -0.1, out.Score, c.name)
		}
		assert.Contains(t, out.Reason, c.reason, c.name)
	}
	code := FormatFunc(FormatConfig{Reward: 1, RequireCode: true, Pattern: regexp.MustCompile(`(?s)^<think>.*</think>`)})
	out, err := code(context.Background(), Input{Response: "<think>x</think>```python\npass\n```"})
	require.NoError(t, err)
	assert.True(t, out.Acc)
	out, err = code(context.Background(), Input{Response: "```python\npass\n```"})
	require.NoError(t, err)
	assert.Contains(t, out.Reason, "does not match")

	// Both scores zero are 1 and 0; one score set keeps the other at zero.
	// The zero FormatConfig requires nothing, so it scores everything 1.
	zero, err := FormatFunc(FormatConfig{})(context.Background(), Input{Response: "anything"})
	require.NoError(t, err)
	assert.Equal(t, Output{Score: 1, Acc: true, Reason: "format ok"}, zero)
	for _, c := range []struct {
		cfg       FormatConfig
		good, ill float64
	}{
		{FormatConfig{RequireCode: true}, 1, 0},
		{FormatConfig{RequireCode: true, Penalty: -1}, 0, -1},
		{FormatConfig{RequireCode: true, Reward: 0.5}, 0.5, 0},
	} {
		f := FormatFunc(c.cfg)
		out, err := f(context.Background(), Input{Response: "```python\npass\n```"})
		require.NoError(t, err)
		assert.Equal(t, c.good, out.Score, "%+v well-formed", c.cfg)
		out, err = f(context.Background(), Input{Response: "no code"})
		require.NoError(t, err)
		assert.Equal(t, c.ill, out.Score, "%+v ill-formed", c.cfg)
		assert.False(t, out.Acc)
	}
}
