package hftrain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/hftrain"
	"github.com/agentrl/agentrl/policy/toymodel"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// nano writes toymodel's Nano Qwen3 (a context of 1024 tokens) and
// returns its folder.
func nano(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := toymodel.WriteQwen3(dir, toymodel.Nano(), 1)
	require.NoError(t, err)
	return dir
}

// cpu loads on the CPU whatever the machine has.
var cpu = hftrain.Options{Device: device.Config{Device: device.Spec{Kind: device.CPU}}}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	_, err := hftrain.Load(ctx, filepath.Join(t.TempDir(), "absent"), cpu)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A config whose vocabulary is smaller than the tokenizer's is not
	// this tokenizer's model.
	dir := nano(t)
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(raw, &cfg))
	cfg["vocab_size"] = 1000
	raw, err = json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	_, err = hftrain.Load(ctx, dir, cpu)
	assert.ErrorContains(t, err, "the model's vocab_size is 1000: the tokenizer does not belong to this model")
}

// TestModelPrompts: the model's context bounds the prompts rendered for
// it: with 1000 of its 1024 tokens kept for the response, a prompt of
// more than 24 tokens is left out and counted.
func TestModelPrompts(t *testing.T) {
	ctx := context.Background()
	var log bytes.Buffer
	o := cpu
	o.Log = &log
	m, err := hftrain.Load(ctx, nano(t), o)
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, 1024, m.ContextLength())
	assert.True(t, strings.HasPrefix(log.String(), "device: cpu"), "Options.Log hears the device: %q", log.String())

	user := func(s string) []rollout.Message { return []rollout.Message{{Role: "user", Content: s}} }
	prompts := []agentrl.Prompt{
		{ID: "short", Messages: user("Hi")},
		{ID: "long", Messages: user(strings.Repeat("word ", 40))},
	}
	got, left, err := m.RenderPrompts(ctx, prompts, nil, agentrl.PromptOptions{ResponseTokens: 1000})
	require.NoError(t, err)
	assert.Equal(t, 1, left)
	require.Len(t, got, 1)
	assert.Equal(t, "short", got[0].ID)
	assert.LessOrEqual(t, len(got[0].Tokens), 24)
	assert.Equal(t, "Hi", got[0].Task, "the task's text stays for a judge")

	_, _, err = m.RenderPrompts(ctx, prompts, nil, agentrl.PromptOptions{ResponseTokens: 1024})
	assert.ErrorContains(t, err, "leaves no room for a prompt in the model's context of 1024 tokens")

	got, left, err = m.RenderPrompts(ctx, prompts, nil, agentrl.PromptOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, left, "without a response budget every prompt that fits the context is kept")
	assert.Len(t, got, 2)
}

// TestModelNewTrainer: NewTrainer fills the policy, the engine and the
// context in; a budget that fills the context is refused, and prompts
// that leave less than the budget are left out, said and counted.
func TestModelNewTrainer(t *testing.T) {
	ctx := context.Background()
	m, err := hftrain.Load(ctx, nano(t), cpu)
	require.NoError(t, err)
	defer m.Close()

	_, err = m.NewEngine(hftrain.Rollout{})
	assert.ErrorContains(t, err, "Rollout.MaxResponseTokens is 0, want > 0")
	tf := m.ToolFormat()
	assert.Equal(t, rollout.FormatHermes, tf.Name, "Qwen3's template writes <tool_call> blocks")
	assert.Equal(t, rollout.ChatML{}, tf.Format)

	user := func(s string) []rollout.Message { return []rollout.Message{{Role: "user", Content: s}} }
	prompts := []agentrl.Prompt{
		{ID: "a", Messages: user("Hi"), GroundTruth: "x"},
		{ID: "b", Messages: user("Ho"), GroundTruth: "x"},
		{ID: "long", Messages: user(strings.Repeat("word ", 40)), GroundTruth: "x"},
	}
	rf := func(context.Context, reward.Input) (reward.Output, error) { return reward.Output{}, nil }
	cfg := agentrl.GRPOTCR()
	cfg.PromptsPerStep, cfg.SamplesPerPrompt = 2, 2
	cfg.MiniBatchSize, cfg.MicroBatchSize = 4, 4
	cfg.Overlong = nil

	_, err = m.NewTrainer(ctx, cfg, hftrain.Rollout{MaxResponseTokens: 1024}, agentrl.TrainerParts{Prompts: prompts, Reward: rf})
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "leaves no room for a prompt in the model's context of 1024 tokens")

	var notes bytes.Buffer
	tr, err := m.NewTrainer(ctx, cfg, hftrain.Rollout{MaxResponseTokens: 1000}, agentrl.TrainerParts{Prompts: prompts, Reward: rf, Notes: &notes})
	require.NoError(t, err)
	defer tr.Close()
	assert.Contains(t, notes.String(), "agentrl: 1 of 3 prompts left out: longer than the 24 tokens that the model's context of 1024 leaves after the response budget of 1000")

	_, err = m.NewTrainer(ctx, cfg, hftrain.Rollout{MaxResponseTokens: 8}, agentrl.TrainerParts{Prompts: []agentrl.Prompt{{ID: "a", Messages: user("Hi")}, {ID: "b", Messages: user("Ho")}}, Reward: rf})
	assert.ErrorContains(t, err, "have no GroundTruth")
}
