package record_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/rollout"
)

// goAgent is a multi-turn tool-calling agent written against OpenAI's
// official Go client, as any program would be: it asks its question,
// runs the add tool for every call the model makes, sends the results
// back with the model's own message, and ends when the model answers
// without a call; then it posts a reward for its session.
type goAgent struct {
	base, session string
	stream        bool
	// seen are the messages the client received, in order.
	seen []openai.ChatCompletionMessage
}

func (a *goAgent) run(ctx context.Context, question string, rewardValue float64) error {
	client := openai.NewClient(option.WithBaseURL(a.base+"/v1"), option.WithAPIKey("unused"),
		option.WithHeader(record.SessionHeader, a.session), option.WithMaxRetries(0))
	msgs := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You add numbers with the add tool."),
		openai.UserMessage(question),
	}
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name: "add", Description: openai.String("Add two integers."),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
			"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "integer"}}, "required": []string{"a", "b"}},
	})}
	for range 4 {
		params := openai.ChatCompletionNewParams{Model: "any-model", Messages: msgs, Tools: tools, Seed: openai.Int(7), MaxCompletionTokens: openai.Int(64)}
		var msg openai.ChatCompletionMessage
		if a.stream {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			s := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				return err
			}
			if len(acc.Choices) != 1 {
				return fmt.Errorf("stream gave %d choices", len(acc.Choices))
			}
			msg = acc.Choices[0].Message
		} else {
			resp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				return err
			}
			msg = resp.Choices[0].Message
		}
		a.seen = append(a.seen, msg)
		msgs = append(msgs, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			break
		}
		for _, tc := range msg.ToolCalls {
			var args struct{ A, B int }
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
				return err
			}
			msgs = append(msgs, openai.ToolMessage(strconv.Itoa(args.A+args.B), tc.ID))
		}
	}
	body, _ := json.Marshal(map[string]any{"reward": rewardValue, "acc": rewardValue > 0})
	resp, err := http.Post(a.base+"/v1/sessions/"+a.session+"/reward", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("posting the reward: %s", resp.Status)
	}
	return nil
}

// Qwen3's end of turn, and what its chat template renders after an
// assistant message that called add when the agent answers with "5":
// the "\n" closing the message after the <|im_end|> the model wrote,
// the tool message in a user turn, and the generation prompt (from
// the template in tokenizer_config.json: the 'tool' branch and
// add_generation_prompt).
const (
	imEnd    = "<|im_end|>"
	afterAdd = "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
)

// TestOpenAIGoToolCalling runs the Go client's agent through a
// two-call tool-calling session, streaming and not, over a scripted
// sampler with Qwen3's tokenizer and template, and checks that the
// recorded calls are token for token what the sampler was asked and
// sampled, that the second prompt reuses the first call's sampled
// tokens followed by the template's rendering of the tool result, and
// that the session becomes one trajectory with the right mask.
func TestOpenAIGoToolCalling(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		call   string // how the model writes its call
		drift  bool   // the template renders the call otherwise
	}{
		{"non-streaming", false, `{"name": "add", "arguments": {"a": 2, "b": 3}}`, false},
		{"streaming", true, `{"name": "add", "arguments": {"a": 2, "b": 3}}`, false},
		{"compact call: re-rendering would drift", false, `{"name":"add","arguments":{"a":2,"b":3}}`, true},
		{"streaming, compact call", true, `{"name":"add","arguments":{"a":2,"b":3}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := "<tool_call>\n" + tc.call + "\n</tool_call>" + imEnd
			rec, sp, ts, tok := scripted(t, first, "2 + 3 = 5."+imEnd)
			a := &goAgent{base: ts.URL, session: "s-1", stream: tc.stream}
			require.NoError(t, a.run(context.Background(), "What is 2 + 3?", 1))

			// What the client saw: a call of add with {"a":2,"b":3},
			// then the answer.
			require.Len(t, a.seen, 2)
			require.Len(t, a.seen[0].ToolCalls, 1)
			assert.Equal(t, "add", a.seen[0].ToolCalls[0].Function.Name)
			assert.JSONEq(t, `{"a": 2, "b": 3}`, a.seen[0].ToolCalls[0].Function.Arguments)
			assert.Empty(t, a.seen[0].Content)
			assert.Equal(t, "2 + 3 = 5.", a.seen[1].Content)

			s, ok := rec.Session("s-1")
			require.True(t, ok)
			require.Len(t, s.Calls, 2)
			require.NotNil(t, s.Reward)
			assert.Equal(t, 1.0, s.Reward.Score)
			assert.True(t, s.Reward.Acc)
			// Token for token what the policy was asked and sampled.
			require.Len(t, sp.reqs, 2)
			for i, c := range s.Calls {
				assert.Equal(t, sp.reqs[i].Prompt, c.Prompt, "call %d prompt", i)
				assert.Equal(t, sp.gens[i].Tokens, c.Tokens, "call %d tokens", i)
				assert.Equal(t, sp.gens[i].LogProbs, c.LogProbs, "call %d log-probs", i)
				assert.Equal(t, "record/s-1", sp.reqs[i].Session)
			}
			assert.Equal(t, tok.Encode(first), s.Calls[0].Tokens)
			assert.Equal(t, tok.Encode("2 + 3 = 5."+imEnd), s.Calls[1].Tokens)
			// The first prompt is the template's rendering.
			assert.Equal(t, -1, s.Calls[0].Reused)
			assert.False(t, s.Calls[0].Drift)
			rendered, err := tok.ApplyChatTemplate(s.Calls[0].Messages, s.Calls[0].Tools, tokenizer.ChatOptions{AddGenerationPrompt: true})
			require.NoError(t, err)
			assert.Equal(t, tok.Encode(rendered), s.Calls[0].Prompt)
			// The second reuses the first's tokens, then the tool result.
			assert.Equal(t, 0, s.Calls[1].Reused)
			want := slices.Concat(s.Calls[0].Prompt, s.Calls[0].Tokens, tok.Encode(afterAdd))
			assert.Equal(t, want, s.Calls[1].Prompt)
			assert.Equal(t, tc.drift, s.Calls[1].Drift)

			trajs, err := rec.Trajectories(s, record.Split)
			require.NoError(t, err)
			require.Len(t, trajs, 1)
			tr := trajs[0]
			assert.Equal(t, slices.Concat(s.Calls[1].Prompt, s.Calls[1].Tokens), tr.Tokens)
			assert.Equal(t, len(s.Calls[0].Prompt), tr.PromptLen)
			p0, n0, glue, n1 := len(s.Calls[0].Prompt), len(s.Calls[0].Tokens), len(tok.Encode(afterAdd)), len(s.Calls[1].Tokens)
			wantMask := slices.Concat(make([]float32, p0), ones(n0), make([]float32, glue), ones(n1))
			assert.Equal(t, wantMask, tr.Mask)
			assert.Equal(t, []rollout.Turn{
				{Start: p0, End: p0 + n0, ResultEnd: p0 + n0 + glue, Text: first, Finish: "stop_token", StopToken: qwen3.IMEndID, Calls: []int{0}, Latency: tr.Turns[0].Latency},
				{Start: p0 + n0 + glue, End: p0 + n0 + glue + n1, ResultEnd: p0 + n0 + glue + n1, Text: "2 + 3 = 5." + imEnd, Finish: "stop_token", StopToken: qwen3.IMEndID, Latency: tr.Turns[1].Latency},
			}, tr.Turns)
			require.Len(t, tr.ToolCalls, 1)
			assert.Equal(t, "add", tr.ToolCalls[0].Name)
			assert.Equal(t, "5", tr.ToolCalls[0].Result.Content)
			assert.NoError(t, tr.ToolCalls[0].Err)
			assert.Equal(t, rollout.StopNoToolCall, tr.Stop)
			wantLP := make([]float32, len(tr.Tokens))
			for i, id := range tr.Tokens {
				if tr.Mask[i] == 1 {
					wantLP[i] = -float32(id) / 1000 // policytest.DefaultLogProb
				}
			}
			assert.Equal(t, wantLP, tr.LogProbs)
		})
	}
}

func ones(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// TestOpenAIGoChoices: a request with n 3 from the Go client gets three
// choices, sampled as one batch (the third with a seed derived from the
// request's, the first with the request's own), each recorded as a call;
// the agent goes on from the third, whose tokens the next prompt
// reuses; Split then gives the two unchosen choices as trajectories of
// their own (StopRewritten) and the chosen one with its continuation
// last, and Reject refuses the session. Streamed, n 2 gives both
// choices' contents by index.
func TestOpenAIGoChoices(t *testing.T) {
	rec, sp, ts, tok := scripted(t)
	ps := sp.Sampler.(*policytest.Sampler)
	call := func(a, b int) string {
		return fmt.Sprintf("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": %d, \"b\": %d}}\n</tool_call>%s", a, b, imEnd)
	}
	ps.Enqueue(policytest.Response{Text: call(1, 1), Finish: "stop_token"}, policytest.Response{Text: "Six." + imEnd, Finish: "stop_token"},
		policytest.Response{Text: call(2, 3), Finish: "stop_token"}, policytest.Response{Text: "2 + 3 = 5." + imEnd, Finish: "stop_token"})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/sessions/n3/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "add"})}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is 2 + 3?")}
	ctx := context.Background()
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: msgs, Tools: tools, N: openai.Int(3), Seed: openai.Int(11)})
	require.NoError(t, err)
	require.Len(t, resp.Choices, 3)
	for i, c := range resp.Choices {
		assert.EqualValues(t, i, c.Index)
	}
	assert.Equal(t, "tool_calls", resp.Choices[0].FinishReason)
	assert.Equal(t, "Six.", resp.Choices[1].Message.Content)
	assert.Equal(t, "stop", resp.Choices[1].FinishReason)
	require.Len(t, resp.Choices[2].Message.ToolCalls, 1)
	assert.JSONEq(t, `{"a": 2, "b": 3}`, resp.Choices[2].Message.ToolCalls[0].Function.Arguments)
	assert.EqualValues(t, len(tok.Encode(call(1, 1)+"Six."+imEnd+call(2, 3))), resp.Usage.CompletionTokens, "the tokens of every choice")

	chosen := resp.Choices[2].Message
	msgs = append(msgs, chosen.ToParam(), openai.ToolMessage("5", chosen.ToolCalls[0].ID))
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: msgs, Tools: tools})
	require.NoError(t, err)

	require.Len(t, sp.reqs, 4)
	require.NotNil(t, sp.reqs[0].Params.Seed)
	assert.EqualValues(t, 11, *sp.reqs[0].Params.Seed)
	assert.NotEqual(t, *sp.reqs[0].Params.Seed, *sp.reqs[2].Params.Seed)
	assert.NotEqual(t, *sp.reqs[1].Params.Seed, *sp.reqs[2].Params.Seed)
	s, ok := rec.Session("n3")
	require.True(t, ok)
	require.Len(t, s.Calls, 4)
	for i, c := range s.Calls[:3] {
		assert.Equal(t, i, c.Choice)
		assert.Equal(t, s.Calls[0].Prompt, c.Prompt)
		assert.Equal(t, sp.gens[i].Tokens, c.Tokens)
	}
	assert.Equal(t, 2, s.Calls[3].Reused, "the agent sent the third choice back")
	assert.Equal(t, slices.Concat(s.Calls[2].Prompt, s.Calls[2].Tokens, tok.Encode(afterAdd)), s.Calls[3].Prompt)

	trajs, err := rec.Trajectories(s, record.Split)
	require.NoError(t, err)
	require.Len(t, trajs, 3)
	for i, want := range [][]int{slices.Concat(s.Calls[0].Prompt, s.Calls[0].Tokens), slices.Concat(s.Calls[1].Prompt, s.Calls[1].Tokens), slices.Concat(s.Calls[3].Prompt, s.Calls[3].Tokens)} {
		assert.Equal(t, want, trajs[i].Tokens, "trajectory %d", i)
	}
	assert.Equal(t, []rollout.StopReason{record.StopRewritten, record.StopRewritten, rollout.StopNoToolCall}, []rollout.StopReason{trajs[0].Stop, trajs[1].Stop, trajs[2].Stop})
	assert.Len(t, trajs[2].Turns, 2)
	assert.Equal(t, "5", trajs[2].ToolCalls[0].Result.Content)
	_, err = rec.Trajectories(s, record.Reject)
	assert.ErrorIs(t, err, record.ErrRewritten)
	assert.ErrorContains(t, err, "call 1")

	// Streaming, n 2.
	ps.Enqueue(policytest.Response{Text: "One." + imEnd, Finish: "stop_token"}, policytest.Response{Text: "Two." + imEnd, Finish: "stop_token"})
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", N: openai.Int(2),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count.")}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices, 2)
	assert.Equal(t, "One.", acc.Choices[0].Message.Content)
	assert.Equal(t, "Two.", acc.Choices[1].Message.Content)
	assert.Equal(t, "stop", acc.Choices[1].FinishReason)
}
