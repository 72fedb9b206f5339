package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/arith"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// The replies of the game: what the model reads after a wrong guess.
const (
	replyHigher  = "higher"
	replyLower   = "lower"
	replyInvalid = "a number, please"
)

// promptText is the game's opening, rendered as the task's chat template
// renders one user message and the assistant's header.
func promptText(size int) string {
	return arith.ImStart + "user\nGuess my number from 1 to " + strconv.Itoa(size) + "." + arith.ImEnd + "\n" + arith.ImStart + "assistant\n"
}

// game is the environment of one episode: a secret number in 1..size
// that the model guesses one turn at a time. A wrong guess is answered
// "higher" or "lower" (a user message) and costs penalty (the turn's
// reward, −penalty); the right one ends the episode. Its state is the
// interval the secret is known to lie in, so that GiGPO groups the turns
// taken with the same knowledge.
type game struct {
	secret, size int
	penalty      float64
	lo, hi       int
}

// newGame is the environment factory of the task: the secret is the
// prompt's ground truth.
func newGame(size int, penalty float64) rollout.EnvFactory {
	return func(_ context.Context, task rollout.Task) (rollout.Env, error) {
		secret, err := strconv.Atoi(task.GroundTruth)
		if err != nil || secret < 1 || secret > size {
			return nil, fmt.Errorf("secret %q: want a number from 1 to %d", task.GroundTruth, size)
		}
		return &game{secret: secret, size: size, penalty: penalty}, nil
	}
}

func (g *game) state() string { return fmt.Sprintf("%d-%d", g.lo, g.hi) }

// Open starts with nothing known.
func (g *game) Open(context.Context) (rollout.Opening, error) {
	g.lo, g.hi = 1, g.size
	return rollout.Opening{State: g.state()}, nil
}

// Step answers a guess.
func (g *game) Step(_ context.Context, a rollout.Action) (rollout.Feedback, error) {
	n, ok := parseGuess(a.Text)
	cost := -g.penalty
	switch {
	case !ok:
		return rollout.Feedback{Observation: userSays(replyInvalid), Reward: &cost, State: g.state()}, nil
	case n == g.secret:
		return rollout.Feedback{Done: true}, nil
	case n < g.secret:
		g.lo = max(g.lo, n+1)
		return rollout.Feedback{Observation: userSays(replyHigher), Reward: &cost, State: g.state()}, nil
	default:
		g.hi = min(g.hi, n-1)
		return rollout.Feedback{Observation: userSays(replyLower), Reward: &cost, State: g.state()}, nil
	}
}

// Close has nothing to release.
func (g *game) Close() error { return nil }

func userSays(s string) []rollout.Message { return []rollout.Message{{Role: "user", Content: s}} }

// parseGuess reads a turn's text: a number, then the end of the turn.
func parseGuess(text string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(text, arith.ImEnd)))
	return n, err == nil
}

// lastGuess is the text of the last turn of a response: what follows the
// last assistant header.
func lastGuess(response string) string {
	if i := strings.LastIndex(response, arith.ImStart+"assistant\n"); i >= 0 {
		return response[i+len(arith.ImStart+"assistant\n"):]
	}
	return response
}

// solved is the task's reward function: 1, and correct, when the last
// guess is the secret (the game ended on it), 0 otherwise. The game's
// per-turn costs are added to it by the advantage estimator.
func solved(_ context.Context, in reward.Input) (reward.Output, error) {
	n, ok := parseGuess(lastGuess(in.Response))
	pred := strconv.Itoa(n)
	if !ok {
		pred = ""
	}
	if ok && pred == in.GroundTruth {
		return reward.Output{Score: 1, Acc: true, Pred: pred}, nil
	}
	return reward.Output{Pred: pred}, nil
}

// prompts are n games with secrets drawn by r.
func prompts(r *rand.Rand, n, size int, prefix string) []agentrl.Prompt {
	out := make([]agentrl.Prompt, n)
	for i := range out {
		secret := 1 + r.IntN(size)
		out[i] = agentrl.Prompt{ID: fmt.Sprintf("%s-%d", prefix, i), Text: promptText(size), GroundTruth: strconv.Itoa(secret), DataSource: "guess"}
	}
	return out
}

// playerGuess is the SFT player's next guess: with probability
// randomFrac any number from 1 to size not guessed yet, ignoring what the
// game said (a player that does not listen), otherwise the middle of the
// interval the secret is known to lie in (bisection, which never needs
// more than ⌈log2(size+1)⌉ guesses).
func playerGuess(r *rand.Rand, g *game, guessed map[int]bool, randomFrac float64) int {
	if r.Float64() < randomFrac {
		var left []int
		for n := 1; n <= g.size; n++ {
			if !guessed[n] {
				left = append(left, n)
			}
		}
		return left[r.IntN(len(left))]
	}
	return (g.lo + g.hi) / 2
}

// buildSFT plays n games with the SFT player through the game itself and
// lays each out as the rollout engine lays out a trajectory: the prompt
// (mask 0), each guess and the end of its turn (mask 1), each reply as
// rollout.ChatML renders a user message after a turn (mask 0). Games the
// player does not win within turns guesses are kept: the SFT policy
// imitates the player's habits, good and bad. It also returns each game's
// secret.
func buildSFT(ctx context.Context, r *rand.Rand, tok *tokenizer.Bytes, n, size, turns int, randomFrac float64) ([]agentrl.SFTSample, []int, error) {
	out := make([]agentrl.SFTSample, n)
	secrets := make([]int, n)
	for i := range out {
		var smp agentrl.SFTSample
		add := func(text string, mask float32) {
			ids := tok.Encode(text)
			smp.IDs = append(smp.IDs, ids...)
			for range ids {
				smp.Mask = append(smp.Mask, mask)
			}
		}
		g := &game{secret: 1 + r.IntN(size), size: size}
		secrets[i] = g.secret
		if _, err := g.Open(ctx); err != nil {
			return nil, nil, err
		}
		add(promptText(size), 0)
		guessed := map[int]bool{}
		for k := range turns {
			guess := playerGuess(r, g, guessed, randomFrac)
			guessed[guess] = true
			turn := strconv.Itoa(guess) + arith.ImEnd
			add(turn, 1)
			fb, err := g.Step(ctx, rollout.Action{Turn: k, Text: turn})
			if err != nil {
				return nil, nil, err
			}
			if fb.Done || k == turns-1 {
				break
			}
			glue, err := rollout.ChatML{}.RenderMessages(turn, fb.Observation)
			if err != nil {
				return nil, nil, err
			}
			add(glue, 0)
		}
		out[i] = smp
	}
	return out, secrets, nil
}
