package record_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/policy/tokenizer/qwen3"
	"github.com/agentrl/agentrl/record"
	"github.com/agentrl/agentrl/rollout"
)

// nodeMessage is a message of the Node client's conversation.
type nodeMessage struct {
	Role      string  `json:"role"`
	Content   *string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

type nodeLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type nodeRun struct {
	Content       string        `json:"content"`
	Messages      []nodeMessage `json:"messages"`
	ContentDeltas int           `json:"contentDeltas"`
	Usage         []*struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Reward int `json:"reward"`
}

type nodeRefusal struct {
	Status  int    `json:"status"`
	Message string `json:"message"`
	Error   struct {
		Type  string  `json:"type"`
		Param *string `json:"param"`
	} `json:"error"`
}

// TestOpenAINodeClient runs agents written against OpenAI's official
// Node client (testdata/openai_agent.js; set AGENTRL_OPENAI_NODE_MODULES
// to a node_modules folder holding the npm package openai, as
// .ci/openai_node.sh does; skipped otherwise) over a scripted sampler
// with Qwen3's tokenizer and template: the client's own tool-calling
// loop (runTools), streaming and not, with the session named by the
// header and by the base URL; calls with log-probabilities, streaming
// and not, with the session in "user"; and refusals. It checks what the
// client made of each answer, and that the recorded calls are token for
// token what the sampler was asked and sampled, each session one
// trajectory whose second prompt extends the first call's sampled
// tokens.
func TestOpenAINodeClient(t *testing.T) {
	mods := os.Getenv("AGENTRL_OPENAI_NODE_MODULES")
	if mods == "" {
		t.Skip("set AGENTRL_OPENAI_NODE_MODULES to a node_modules folder with the npm package openai")
	}
	call := "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>" + imEnd
	rec, sp, ts, tok := scripted(t, call, "2 + 3 = 5."+imEnd)
	ps := sp.Sampler.(*policytest.Sampler)
	ps.HandleText("<|im_start|>user\nSay hello.", policytest.Response{Text: "Héllo!" + imEnd, Finish: "stop_token"})

	script, err := filepath.Abs("testdata/openai_agent.js")
	require.NoError(t, err)
	cmd := exec.Command("node", script, ts.URL)
	cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Logf("node: %s", exit.Stderr)
	}
	require.NoError(t, err)
	var r struct {
		RunTools, RunToolsStream nodeRun
		Logprobs                 struct {
			Choices []struct {
				Message      nodeMessage `json:"message"`
				FinishReason string      `json:"finish_reason"`
				Logprobs     struct {
					Content []nodeLogprob `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		StreamLogprobs []struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
				Logprobs *struct {
					Content []nodeLogprob `json:"content"`
				} `json:"logprobs"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		Errors map[string]*nodeRefusal
	}
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)

	for _, c := range []struct {
		name, session string
		run           nodeRun
		reward        float64
	}{
		{"runTools, header", "node-a", r.RunTools, 1},
		{"runTools streaming, base URL", "node-b", r.RunToolsStream, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The client's loop: the call of add, its result "5" sent
			// back under the call's id, the answer.
			assert.Equal(t, "2 + 3 = 5.", c.run.Content)
			require.Len(t, c.run.Messages, 5, "system, user, assistant call, tool, assistant answer")
			m := c.run.Messages[2]
			require.Len(t, m.ToolCalls, 1)
			assert.Equal(t, "add", m.ToolCalls[0].Function.Name)
			assert.JSONEq(t, `{"a": 2, "b": 3}`, m.ToolCalls[0].Function.Arguments)
			assert.True(t, m.Content == nil || *m.Content == "")
			assert.Equal(t, "tool", c.run.Messages[3].Role)
			assert.Equal(t, m.ToolCalls[0].ID, c.run.Messages[3].ToolCallID)
			assert.Equal(t, "5", *c.run.Messages[3].Content)
			assert.Equal(t, 200, c.run.Reward)

			s, ok := rec.Session(c.session)
			require.True(t, ok)
			require.Len(t, s.Calls, 2)
			require.NotNil(t, s.Reward)
			assert.Equal(t, c.reward, s.Reward.Score)
			for i, call := range s.Calls {
				k := slices.IndexFunc(sp.reqs, func(q lm.GenerateRequest) bool {
					return q.Session == "record/"+c.session && slices.Equal(q.Prompt, call.Prompt)
				})
				require.GreaterOrEqual(t, k, 0, "call %d: the sampler was asked for its prompt", i)
				assert.Equal(t, sp.gens[k].Tokens, call.Tokens, "call %d", i)
				assert.Equal(t, sp.gens[k].LogProbs, call.LogProbs, "call %d", i)
			}
			assert.Equal(t, tok.Encode(call), s.Calls[0].Tokens)
			assert.Equal(t, 0, s.Calls[1].Reused, "the client sent the call back unchanged")
			assert.Equal(t, slices.Concat(s.Calls[0].Prompt, s.Calls[0].Tokens, tok.Encode(afterAdd)), s.Calls[1].Prompt)
			trajs, err := rec.Trajectories(s, record.Reject)
			require.NoError(t, err)
			require.Len(t, trajs, 1)
			assert.Equal(t, slices.Concat(s.Calls[1].Prompt, s.Calls[1].Tokens), trajs[0].Tokens)
			assert.Equal(t, rollout.StopNoToolCall, trajs[0].Stop)
			assert.Equal(t, "5", trajs[0].ToolCalls[0].Result.Content)
		})
	}
	// Streaming: the answer's content came in deltas, and with
	// include_usage each completion carried its usage.
	assert.Positive(t, r.RunToolsStream.ContentDeltas)
	require.Len(t, r.RunToolsStream.Usage, 2)
	sb, _ := rec.Session("node-b")
	for i, u := range r.RunToolsStream.Usage {
		require.NotNil(t, u, "completion %d", i)
		assert.Equal(t, len(sb.Calls[i].Prompt), u.PromptTokens)
		assert.Equal(t, len(sb.Calls[i].Tokens), u.CompletionTokens)
	}

	// Log-probabilities: one entry per sampled token, policytest's −id/1000, with the token's bytes ("é" is two
	// bytes of one token or split between two).
	hello := tok.Encode("Héllo!")
	require.Len(t, r.Logprobs.Choices, 1)
	ch := r.Logprobs.Choices[0]
	assert.Equal(t, "Héllo!", *ch.Message.Content)
	assert.Equal(t, "stop", ch.FinishReason)
	lps := ch.Logprobs.Content
	var streamed []nodeLogprob
	var text strings.Builder
	for _, c := range r.StreamLogprobs {
		assert.Equal(t, "chat.completion.chunk", c.Object)
		for _, x := range c.Choices {
			if x.Delta.Content != nil {
				text.WriteString(*x.Delta.Content)
			}
			if x.Logprobs != nil {
				streamed = append(streamed, x.Logprobs.Content...)
			}
		}
	}
	assert.Equal(t, "Héllo!", text.String())
	for name, got := range map[string][]nodeLogprob{"non-streaming": lps, "streaming": streamed} {
		want := slices.Concat(hello, []int{qwen3.IMEndID}) // every sampled token, the stop token too
		require.Len(t, got, len(want), name)
		var bs []byte
		for i, id := range want {
			assert.InDelta(t, float64(policytest.DefaultLogProb(id)), got[i].Logprob, 1e-6, "%s token %d", name, i)
			for _, b := range got[i].Bytes {
				bs = append(bs, byte(b))
			}
		}
		assert.True(t, strings.HasPrefix(string(bs), "Héllo!"), "%s: the tokens' bytes spell the text: %q", name, bs)
	}
	for _, id := range []string{"node-c", "node-d"} {
		s, ok := rec.Session(id)
		require.True(t, ok, id)
		require.Len(t, s.Calls, 1, id)
		assert.Equal(t, slices.Concat(hello, []int{qwen3.IMEndID}), s.Calls[0].Tokens, id)
	}

	for _, c := range []struct {
		name   string
		status int
		msg    string
	}{
		{"required", 400, `400 tool_choice "required" is not supported by this server`},
		{"topLogprobs", 400, "400 top_logprobs must be between 0 and 20, got 21"},
		{"noMessages", 400, "400 messages must be a non-empty list"},
		{"ended", 409, `409 session "node-a" has ended: its reward is set`},
	} {
		got := r.Errors[c.name]
		require.NotNil(t, got, "%s was answered", c.name)
		assert.Equal(t, c.status, got.Status, c.name)
		assert.Equal(t, c.msg, got.Message, c.name)
		assert.Equal(t, "invalid_request_error", got.Error.Type, c.name)
	}
}
