package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/rollout"
)

// scriptedGames plays the game with secret through the rollout engine,
// the sampler answering the guesses given, and returns the trajectory.
func scriptedGames(t *testing.T, secret string, guesses ...string) rollout.Trajectory {
	t.Helper()
	tok, err := arith.NewTokenizer()
	require.NoError(t, err)
	eos, _ := tok.TokenID(arith.ImEnd)
	s := policytest.New(policytest.Config{Encode: tok.Encode, Decode: tok.Decode, EOS: []int{eos}})
	var script []policytest.Response
	for _, g := range guesses {
		script = append(script, policytest.Text(g+arith.ImEnd))
	}
	s.HandleDefault(script...)
	e, err := rollout.NewEngine(rollout.Config{Sampler: s, Tokenizer: tok, MaxTurns: 4, MaxResponseTokens: 256, Env: newGame(8, 0.1)})
	require.NoError(t, err)
	trajs, err := e.Run(context.Background(), []rollout.Request{{PromptText: promptText(8), Task: rollout.Task{GroundTruth: secret}}})
	require.NoError(t, err)
	require.Len(t, trajs, 1)
	return trajs[0]
}

// TestGameThroughEngine plays games through the engine and checks the
// replies, the per-turn rewards, the states, the stop reason and the
// reward function's verdict, derived by hand from the rules.
func TestGameThroughEngine(t *testing.T) {
	cases := []struct {
		name, secret string
		guesses      []string
		replies      []string // after each guess but the last
		rewards      []float64
		states       []string
		stop         rollout.StopReason
		won          bool
	}{
		{
			// 4 → higher (5-8), 6 → lower (5-5), 5 → won.
			name: "bisect", secret: "5", guesses: []string{"4", "6", "5"},
			replies: []string{replyHigher, replyLower}, rewards: []float64{-0.1, -0.1, 0},
			states: []string{"1-8", "5-8", "5-5"}, stop: rollout.StopEnvDone, won: true,
		},
		{
			// A game won at once has no turn reward at all.
			name: "first guess", secret: "3", guesses: []string{"3"},
			rewards: nil, states: []string{"1-8"}, stop: rollout.StopEnvDone, won: true,
		},
		{
			// Four wrong guesses: the fourth is the last turn allowed,
			// no reply follows it. A guess that is not a number is
			// answered and leaves the state as it was.
			name: "lost", secret: "8", guesses: []string{"x", "1", "2", "3"},
			replies: []string{replyInvalid, replyHigher, replyHigher}, rewards: []float64{-0.1, -0.1, -0.1, -0.1},
			states: []string{"1-8", "1-8", "2-8", "3-8"}, stop: rollout.StopMaxTurns, won: false,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := scriptedGames(t, c.secret, c.guesses...)
			want := promptText(8)
			for k, g := range c.guesses {
				want += g + arith.ImEnd
				if k < len(c.replies) {
					want += "\n" + arith.ImStart + "user\n" + c.replies[k] + arith.ImEnd + "\n" + arith.ImStart + "assistant\n"
				}
			}
			tok, err := arith.NewTokenizer()
			require.NoError(t, err)
			assert.Equal(t, tok.Encode(want), tr.Tokens)
			assert.Equal(t, c.stop, tr.Stop)
			assert.NoError(t, tr.EnvErr)
			assert.Equal(t, c.rewards, tr.TurnRewards())
			require.Len(t, tr.Turns, len(c.guesses))
			for k := range tr.Turns {
				assert.Equal(t, c.states[k], tr.Turns[k].State, "turn %d", k)
			}
			p := agentrl.Prompt{GroundTruth: c.secret}
			out, err := solved(context.Background(), p.RewardInput(&tr))
			require.NoError(t, err)
			assert.Equal(t, c.won, out.Acc)
		})
	}
}

// TestSFTLayoutIsTheEngines checks that the SFT games are laid out token
// for token as the engine lays out the same game: a player's game,
// replayed through the engine by a sampler that makes the same guesses,
// gives the same ids, and the mask marks exactly the guesses.
func TestSFTLayoutIsTheEngines(t *testing.T) {
	tok, err := arith.NewTokenizer()
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(3, 4))
	data, secrets, err := buildSFT(context.Background(), r, tok, 40, 8, 4, 0.5)
	require.NoError(t, err)
	won := 0
	for i, smp := range data {
		require.Len(t, smp.Mask, len(smp.IDs))
		// The guesses are the masked spans, each "N<|im_end|>".
		var guesses []string
		var cur []int
		for j, m := range smp.Mask {
			if m == 1 {
				cur = append(cur, smp.IDs[j])
			}
			if (m == 0 || j == len(smp.Mask)-1) && len(cur) > 0 {
				guesses = append(guesses, strings.TrimSuffix(tok.Decode(cur), arith.ImEnd))
				cur = nil
			}
		}
		require.NotEmpty(t, guesses, "game %d", i)
		require.LessOrEqual(t, len(guesses), 4, "game %d", i)
		tr := scriptedGames(t, strconv.Itoa(secrets[i]), guesses...)
		assert.Equal(t, smp.IDs, tr.Tokens, "game %d", i)
		assert.Equal(t, smp.Mask, tr.Mask, "game %d", i)
		if tr.Stop == rollout.StopEnvDone {
			won++
		}
	}
	// The player wins some games and loses others.
	assert.Greater(t, won, 0)
	assert.Less(t, won, len(data))
}

// TestGameFactoryRejectsBadSecret: a task whose ground truth is not a
// secret of the game fails the factory, which ends that trajectory.
func TestGameFactoryRejectsBadSecret(t *testing.T) {
	for _, gt := range []string{"", "0", "9", "x"} {
		_, err := newGame(8, 0.1)(context.Background(), rollout.Task{GroundTruth: gt})
		assert.Error(t, err, gt)
	}
}

// TestRunEndToEnd runs every stage at a tiny size and checks the output;
// it asserts nothing about learning.
func TestRunEndToEnd(t *testing.T) {
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := program(ctx, []string{"-hidden", "16", "-layers", "1", "-sft-samples", "32", "-sft-steps", "3", "-sft-batch", "8",
		"-rl-steps", "1", "-prompts", "2", "-n", "4", "-eval-k", "2"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got))
	for _, stage := range []string{"sft", "rl"} {
		var res result
		require.NoError(t, json.Unmarshal(got[stage], &res), stage)
		assert.GreaterOrEqual(t, res.Won, 0.0)
		assert.LessOrEqual(t, res.Won, 1.0)
		assert.GreaterOrEqual(t, res.Consistent, 0.0)
		assert.LessOrEqual(t, res.Consistent, 1.0)
	}
	assert.Contains(t, stdout.String(), "SFT+gigpo")
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"-size", "10"}, {"-size", "1"}, {"-turns", "0"}, {"-random-frac", "2"}, {"-hidden", "6"}, {"-n", "1"}, {"-eval-k", "0"}, {"extra"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 2, program(context.Background(), args, &stdout, &stderr), "%v", args)
	}
}
