package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/rollout"
)

// idTok is a tokenizer that writes ids as text, for engines over the
// tiny models' 64 ids (no tool calls: one turn per trajectory).
type idTok struct{}

func (idTok) Encode(string) []int { return nil }
func (idTok) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "<%d>", id)
	}
	return b.String()
}

// noCalls finds no tool calls and asks for no stop strings (the test
// servers have no tokenizer to match them).
type noCalls struct{}

func (noCalls) Parse(string) []rollout.ParsedCall { return nil }
func (noCalls) StopStrings() []string             { return nil }

// TestFleetPartialRollouts: with Config.PartialRollouts, long turns
// sampled without pause on two package serve servers (one updated as
// SGLang, one as vLLM) while versions 1 to 3 are published are cut by
// the publishes and continued by the rollout engine under the new
// weights. Every trajectory comes back once, with its whole budget of
// tokens, and each piece of each turn is exactly what the model of the
// version the trajectory names for it generates greedily after the
// tokens before it, with that model's log-probabilities: before and
// after each cut, each token comes from its own version. Run it under
// the race detector.
func TestFleetPartialRollouts(t *testing.T) {
	ctx := context.Background()
	for _, api := range []openai.API{openai.APICompletions, openai.APISGLangGenerate} {
		t.Run(string(api), func(t *testing.T) {
			hs := kindServers(t, fleet.SGLang, fleet.VLLM)
			f, err := fleet.New(fleet.Config{
				Servers: []fleet.Server{{URL: hs[0].URL}, {URL: hs[1].URL, Kind: fleet.VLLM}}, Dir: t.TempDir(),
				Sampler: openai.Config{API: api, LogprobsMode: openai.ProcessedLogprobs}, PartialRollouts: true,
			})
			require.NoError(t, err)
			models := map[int]*policy.Model{0: tinyModel(t, 1), 1: tinyModel(t, 2), 2: tinyModel(t, 3), 3: tinyModel(t, 4)}
			e, err := rollout.NewEngine(rollout.Config{Sampler: f, Tokenizer: idTok{}, Parser: noCalls{}, MaxTurns: 1, MaxResumes: 100})
			require.NoError(t, err)
			const budget = 56 // the tiny models hold 64 positions
			reqs := make([]rollout.Request, 6)
			for i := range reqs {
				reqs[i] = rollout.Request{ID: fmt.Sprint("p", i), Prompt: []int{1, 2, 3, i}, Params: lm.SampleParams{MaxNewTokens: budget, Logprobs: true}}
			}

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			var trajs []rollout.Trajectory
			var runs atomic.Int64
			for range 3 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						got, err := e.Run(ctx, reqs)
						if !assert.NoError(t, err) {
							return
						}
						runs.Add(1)
						ids := map[string]bool{}
						for _, tr := range got {
							assert.False(t, ids[tr.ID], "trajectory %s made twice", tr.ID)
							ids[tr.ID] = true
						}
						assert.Len(t, ids, len(reqs), "a trajectory is lost")
						mu.Lock()
						trajs = append(trajs, got...)
						mu.Unlock()
					}
				})
			}
			for v := 1; v <= 3; v++ {
				time.Sleep(30 * time.Millisecond)
				require.NoError(t, f.Publish(ctx, v, models[v]))
			}
			time.Sleep(30 * time.Millisecond)
			close(stop)
			wg.Wait()

			cut := 0
			seen := map[int]bool{}
			for _, tr := range trajs {
				require.Len(t, tr.Turns, 1)
				turn := tr.Turns[0]
				pieces := turn.Segments
				if pieces == nil {
					pieces = []rollout.Segment{{Start: turn.Start, End: turn.End, WeightVersion: turn.WeightVersion}}
				} else {
					cut++
				}
				for _, p := range pieces {
					var v int
					_, err := fmt.Sscan(p.WeightVersion, &v)
					require.NoError(t, err)
					seen[v] = true
					want, err := models[v].Generate(ctx, []lm.GenerateRequest{{Prompt: tr.Tokens[:p.Start], Params: lm.SampleParams{MaxNewTokens: p.End - p.Start, Logprobs: true}}})
					require.NoError(t, err)
					require.Equal(t, want[0].Tokens, tr.Tokens[p.Start:p.End], "%s: tokens %d–%d are not version %d's", tr.ID, p.Start, p.End, v)
					require.InDeltaSlice(t, want[0].LogProbs, tr.LogProbs[p.Start:p.End], 1e-5, "%s: log-probs %d–%d are not version %d's", tr.ID, p.Start, p.End, v)
				}
				if turn.Finish == lm.FinishLength {
					assert.Equal(t, budget, turn.End-turn.Start, "%s: a turn that ran out of budget has it all", tr.ID)
				}
			}
			t.Logf("%d runs, %d trajectories, %d turns cut and continued, versions %v", runs.Load(), len(trajs), cut, seen)
			assert.True(t, seen[0] && seen[3], "sampled before and after the publishes")
			assert.Positive(t, cut, "no publish landed mid-turn: the test tests nothing")
		})
	}
}
