package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/agentrl/agentrl/policy/policytest"
	"github.com/agentrl/agentrl/tool"
)

// byteTok is a byte-level tokenizer with Qwen's special tokens: each
// special token is one id from 256 up, every other byte is its own id.
// Being exact and trivial, it lets tests write expected token sequences
// by hand.
type byteTok struct{}

var specials = []string{
	"<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
	"<tool_response>", "</tool_response>", "<|endoftext|>",
}

const (
	imStart = 256 + iota
	imEnd
	toolCallOpen
	toolCallClose
	toolRespOpen
	toolRespClose
	endOfText
)

func (byteTok) Encode(text string) []int {
	var ids []int
	for len(text) > 0 {
		matched := false
		for i, s := range specials {
			if strings.HasPrefix(text, s) {
				ids = append(ids, 256+i)
				text = text[len(s):]
				matched = true
				break
			}
		}
		if !matched {
			ids = append(ids, int(text[0]))
			text = text[1:]
		}
	}
	return ids
}

func (byteTok) Decode(ids []int) string {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			b.WriteByte(byte(id))
		case id >= 256 && id < 256+len(specials):
			b.WriteString(specials[id-256])
		}
	}
	return b.String()
}

func enc(s string) []int { return byteTok{}.Encode(s) }

func newScripted() *policytest.Sampler {
	return policytest.New(policytest.Config{
		Encode: byteTok{}.Encode, Decode: byteTok{}.Decode, EOS: []int{imEnd, endOfText},
	})
}

// funcTool is a tool whose Call is a function.
type funcTool struct {
	name string
	fn   func(ctx context.Context, args json.RawMessage) (tool.Result, error)
}

func (t funcTool) Name() string { return t.name }
func (t funcTool) Schema() json.RawMessage {
	return json.RawMessage(`{"type": "function", "function": {"name": "` + t.name + `", "description": "test tool", "parameters": {"type": "object", "properties": {}}}}`)
}
func (t funcTool) Call(ctx context.Context, args json.RawMessage) (tool.Result, error) {
	return t.fn(ctx, args)
}

// echoTool answers with "echo:" and its arguments.
func echoTool() funcTool {
	return funcTool{name: "echo", fn: func(_ context.Context, args json.RawMessage) (tool.Result, error) {
		return tool.Result{Content: "echo:" + string(args)}, nil
	}}
}

// hangTool blocks until its context ends.
func hangTool(started chan<- struct{}) funcTool {
	var once sync.Once
	return funcTool{name: "hang", fn: func(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
		if started != nil {
			once.Do(func() { close(started) })
		}
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}}
}

func errTool(err error) funcTool {
	return funcTool{name: "broken", fn: func(context.Context, json.RawMessage) (tool.Result, error) {
		return tool.Result{}, err
	}}
}

func panicTool() funcTool {
	return funcTool{name: "panics", fn: func(context.Context, json.RawMessage) (tool.Result, error) {
		panic("boom")
	}}
}

func sleepTool(d time.Duration) funcTool {
	return funcTool{name: "sleep", fn: func(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
		select {
		case <-time.After(d):
			return tool.Result{Content: "slept"}, nil
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}}
}

var errBroken = errors.New("backend unreachable")
