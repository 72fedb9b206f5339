package record_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/reward"
	"github.com/agentrl/agentrl/rollout"
)

// TestSource runs one agent per sample of six requests, each agent
// behaving as its request's ID says, and checks each episode's
// trajectory, reward and stop reason, the counts, and that failures
// (an error, a panic, a hang past the timeout, no call) end only their
// own episode.
func TestSource(t *testing.T) {
	rec, sp, ts, tok := scripted(t, "A."+imEnd, "B."+imEnd)
	ask := func(ctx context.Context, ep record.Episode, msgs ...openai.ChatCompletionMessageParamUnion) (openai.ChatCompletionMessage, error) {
		c := openai.NewClient(option.WithBaseURL(ep.BaseURL), option.WithAPIKey("unused"), option.WithMaxRetries(0))
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: msgs})
		if err != nil {
			return openai.ChatCompletionMessage{}, err
		}
		return resp.Choices[0].Message, nil
	}
	agent := func(ctx context.Context, ep record.Episode) error {
		q := openai.UserMessage(ep.Request.Messages[0].Content)
		switch ep.Request.ID {
		case "ok", "unposted":
			m, err := ask(ctx, ep, q)
			if err != nil {
				return err
			}
			if _, err := ask(ctx, ep, q, m.ToParam(), openai.UserMessage("More.")); err != nil {
				return err
			}
			if ep.Request.ID == "ok" {
				return rec.SetReward(ep.Session, reward.Output{Score: 0.5 + float64(ep.Sample), Acc: true})
			}
			return nil
		case "error":
			if _, err := ask(ctx, ep, q); err != nil {
				return err
			}
			return errors.New("the agent gave up")
		case "panic":
			panic("boom")
		case "hang":
			<-ctx.Done()
			return nil
		case "rewrite":
			if _, err := ask(ctx, ep, q); err != nil {
				return err
			}
			_, err := ask(ctx, ep, openai.SystemMessage("Summary."), q)
			return err
		}
		return errors.New("unknown request")
	}
	src, err := record.NewSource(record.SourceConfig{Recorder: rec, URL: ts.URL + "/", Agent: agent, Timeout: 2 * time.Second, FailScore: -1, Concurrency: 3})
	require.NoError(t, err)
	var reqs []rollout.Request
	for _, id := range []string{"ok", "unposted", "error", "panic", "hang", "rewrite"} {
		reqs = append(reqs, rollout.Request{ID: id, Messages: []rollout.Message{{Role: "user", Content: "Task " + id + "."}},
			Params: lm.SampleParams{Temperature: 1, Seed: new(uint64(5))}, N: 2})
	}
	trajs, outs, err := src.Rollout(context.Background(), reqs)
	require.NoError(t, err)
	require.Len(t, trajs, 12)
	require.Len(t, outs, 12)
	for i, tr := range trajs {
		assert.Equal(t, reqs[i/2].ID, tr.ID)
		assert.Equal(t, i/2, tr.Request)
		assert.Equal(t, i%2, tr.Sample)
		assert.Equal(t, len(tr.Tokens), len(tr.Mask))
	}
	for k := range 2 {
		ok := trajs[k]
		assert.Len(t, ok.Turns, 2)
		assert.Equal(t, rollout.StopNoToolCall, ok.Stop)
		assert.Equal(t, "A."+imEnd, ok.Turns[0].Text)
		assert.Equal(t, "B."+imEnd, ok.Turns[1].Text)
		require.NotNil(t, outs[k])
		assert.Equal(t, 0.5+float64(k), outs[k].Score, "the posted reward")

		assert.Len(t, trajs[2+k].Turns, 2)
		assert.Nil(t, outs[2+k], "no reward posted: the trainer's function scores it")

		assert.Equal(t, record.StopAgentFailed, trajs[4+k].Stop)
		assert.Len(t, trajs[4+k].Turns, 1, "what the failed agent recorded")
		assert.Equal(t, reward.Output{Score: -1, Reason: "agent failed: the agent gave up"}, *outs[4+k])

		p := trajs[6+k]
		assert.Equal(t, record.StopAgentFailed, p.Stop)
		assert.Empty(t, p.Turns)
		assert.Equal(t, len(p.Tokens), p.PromptLen, "the prompt alone")
		assert.Equal(t, tok.Encode("<|im_start|>user\nTask panic.<|im_end|>\n<|im_start|>assistant\n"), p.Tokens)
		assert.Contains(t, outs[6+k].Reason, "agent panicked: boom")

		assert.Equal(t, record.StopAgentFailed, trajs[8+k].Stop)
		assert.Contains(t, outs[8+k].Reason, "ran past its timeout")

		rw := trajs[10+k]
		assert.Len(t, rw.Turns, 1, "the call after the rewrite")
		assert.Equal(t, "B."+imEnd, rw.Turns[0].Text)
		assert.Equal(t, rollout.StopNoToolCall, rw.Stop)
	}
	assert.Equal(t, record.SourceStats{Episodes: 12, Failed: 6, Calls: 2*2 + 2*2 + 2 + 2*2, Reused: 4, Rewritten: 2, DroppedCalls: 2, Posted: 2}, src.Stats())
	assert.Empty(t, rec.Sessions(), "every session was taken")

	// Seeds: sample k of a request with seed 5 samples its calls with
	// seeds s_k, s_k + 1, …, s_k = (5 + k)·0x9E3779B97F4A7C15 (mod 2⁶⁴).
	seeds := map[string][]uint64{}
	for _, r := range sp.reqs {
		seeds[r.Session] = append(seeds[r.Session], *r.Params.Seed)
	}
	want := map[uint64]bool{}
	for k := range uint64(2) {
		s := (5 + k) * 0x9E3779B97F4A7C15
		want[s] = true
	}
	for id, ss := range seeds {
		assert.True(t, want[ss[0]], "session %s starts at a sample's seed", id)
		for j := range ss {
			assert.Equal(t, ss[0]+uint64(j), ss[j], "session %s call %d", id, j)
		}
	}

	_, err = record.NewSource(record.SourceConfig{Recorder: rec})
	assert.ErrorIs(t, err, record.ErrConfig)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = src.Rollout(ctx, reqs[:1])
	assert.ErrorIs(t, err, context.Canceled)
}
