package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/examples/anyagent/agent"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/record"
)

// TestSFTLayoutIsWhatTheAgentRecords: a model that writes exactly an
// SFT conversation's turns (a scripted sampler), driven by the agent
// program through the recorder, gives a trajectory whose tokens and
// loss mask are the SFT sample's: SFT teaches the layout RL trains on.
// One problem calls the tool, the other guesses (no_tool_frac 1/2: the
// second of two).
func TestSFTLayoutIsWhatTheAgentRecords(t *testing.T) {
	tok, err := newTokenizer()
	require.NoError(t, err)
	probs := arith.GenerateProblems(3, 2, "t")
	data, err := buildSFT(tok, probs, 0.5)
	require.NoError(t, err)
	for i, p := range probs {
		ps := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: tok.EOSIDs()})
		answer := strconv.FormatInt(p.Answer, 10)
		if i == 0 {
			ps.HandleDefault(policytest.Response{Text: callText(p.Expr)}, policytest.Response{Text: arith.Answer(answer)})
		} else {
			ps.HandleDefault(policytest.Response{Text: p.Expr + " = " + arith.Answer(arith.RoughGuess(p.Answer))})
		}
		rec, err := record.New(record.Config{Sampler: ps, Template: record.TemplateFunc(tok.ApplyChatTemplate), Tokenizer: tok})
		require.NoError(t, err)
		ts := httptest.NewServer(rec)
		res, err := agent.Solve(context.Background(), ts.URL+"/sessions/s/v1", p.Text)
		ts.Close()
		require.NoError(t, err)
		s, ok := rec.Session("s")
		require.True(t, ok)
		trajs, err := rec.Trajectories(s, record.Reject)
		require.NoError(t, err)
		require.Len(t, trajs, 1)
		assert.Equal(t, data[i].IDs, trajs[0].Tokens, "problem %d", i)
		assert.Equal(t, data[i].Mask, trajs[0].Mask, "problem %d", i)
		if i == 0 {
			assert.Equal(t, agent.Result{Answer: answer, Calls: 2, ToolCalls: 1}, res)
			assert.Equal(t, answer, trajs[0].ToolCalls[0].Result.Content, "the agent's calculator gave the exact value")
			assert.Equal(t, 1, rec.Stats().Reused)
		} else {
			assert.Equal(t, agent.Result{Answer: arith.RoughGuess(p.Answer), Calls: 1}, res)
		}
	}
}

// TestProgram runs the whole program at a tiny size: SFT, the
// evaluations and two RL steps through the agent; every episode is
// recorded, rewarded and trained on.
func TestProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny model")
	}
	var out, errOut bytes.Buffer
	dir := t.TempDir()
	args := []string{"-out", dir, "-hidden", "16", "-layers", "1", "-heads", "2", "-kv-heads", "1",
		"-head-dim", "8", "-ffn", "32", "-sft-samples", "32", "-sft-steps", "2", "-rl-steps", "2", "-prompts", "2", "-n", "2",
		"-eval", "2", "-max-response", "16", "-mini-batch", "0"}
	code := program(context.Background(), args, &out, &errOut)
	require.Equal(t, 0, code, "%s", errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r struct {
		SFT, RL  evaluation
		Sessions record.SourceStats
	}
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &r), out.String())
	// 2 evaluations of 2 problems × 2 episodes, 2 steps of 2 × 2.
	assert.Equal(t, 2*4+2*4, r.Sessions.Episodes)
	assert.Equal(t, r.Sessions.Episodes, r.Sessions.Posted)
	assert.GreaterOrEqual(t, r.Sessions.Calls, r.Sessions.Episodes)
	assert.Contains(t, out.String(), "policy      acc")
	assert.Contains(t, errOut.String(), "sft policy: acc ")

	// metrics.jsonl: the SFT policy's evaluation at step 0, a row per
	// RL step, the RL policy's evaluation in the last.
	rows, err := metrics.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	require.NoError(t, err)
	require.Len(t, rows, 3)
	assert.Equal(t, []int{0, 1, 2}, []int{rows[0].Step, rows[1].Step, rows[2].Step})
	assert.Equal(t, r.SFT.Acc, rows[0].Values["val/heldout/acc"])
	assert.Equal(t, r.RL.Acc, rows[2].Values["val/heldout/acc"])
	assert.Equal(t, r.RL.ToolCalls, rows[2].Values["val/heldout/tool_calls"])
	assert.Contains(t, rows[1].Values, "critic/score/mean")
	assert.NotContains(t, rows[1].Values, "val/heldout/acc")

	// The folder holds a run now: a second one is refused before any work.
	errOut.Reset()
	assert.Equal(t, 1, program(context.Background(), args, &out, &errOut))
	assert.Contains(t, errOut.String(), "holds an earlier run")
}

// TestFlags: bad settings are refused with a message.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "1"}, {"-prompts", "0"}, {"-max-response", "0"}} {
		var out, errOut bytes.Buffer
		assert.Equal(t, 2, program(context.Background(), args, &out, &errOut), "%v", args)
		assert.Contains(t, errOut.String(), "anyagent: ", "%v", args)
	}
}
