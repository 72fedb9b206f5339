package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/agentrl/agentrl/policy/tokenizer"
)

// promptPlan is how a call's prompt was made.
type promptPlan struct {
	tokens []int
	reused int  // admission index of the call whose tokens it begins with; −1 none
	drift  bool // the rendered prompt's tokens differ from tokens
}

// render renders msgs with the template, generation prompt as asked.
func (r *Recorder) render(msgs []tokenizer.Message, tools []json.RawMessage, opts map[string]json.RawMessage, gen bool) (string, error) {
	var vars map[string]any
	if len(opts) > 0 {
		vars = make(map[string]any, len(opts))
		for k, v := range opts {
			vars[k] = v
		}
	}
	return r.cfg.Template.Render(msgs, tools, tokenizer.ChatOptions{AddGenerationPrompt: gen, Vars: vars})
}

// buildPrompt makes the token-faithful prompt of a call with messages
// msgs in session s (nil: none). It renders and tokenises the
// conversation; then, when the conversation holds an assistant message
// that one of the session's calls answered with, sent back unchanged,
// after exactly that call's messages, tools and options, it replaces
// everything up to the end of that message by that call's prompt and
// sampled tokens, and tokenises only what the template renders after it
// (tool results, user turns, the generation prompt). The sampled tokens
// are thus never rendered and tokenised again, and the drift that doing
// so would have caused is reported.
func (r *Recorder) buildPrompt(s *session, p *chatPlan) (promptPlan, error) {
	text, err := r.render(p.messages, p.tools, p.options, true)
	if err != nil {
		return promptPlan{}, err
	}
	rendered := r.cfg.Tokenizer.Encode(text)
	out := promptPlan{tokens: rendered, reused: -1}
	if s == nil {
		return out, nil
	}
	for n := len(p.messages) - 1; n >= 0; n-- {
		if p.messages[n].Role != "assistant" {
			continue
		}
		c, at := s.answered(p.messages[n], p, n)
		if c == nil {
			continue
		}
		glue, err := r.glue(p, n, c)
		if err != nil {
			// The template renders the message in a way the glue cannot
			// be cut from; the rendered prompt is used.
			return out, nil
		}
		toks := slices.Concat(c.Prompt, c.Tokens, r.cfg.Tokenizer.Encode(glue))
		return promptPlan{tokens: toks, reused: at, drift: !slices.Equal(toks, rendered)}, nil
	}
	return out, nil
}

// answered returns the latest recorded call (and its admission index)
// whose Reply is msg and whose request was exactly the conversation
// before position n, with the same tools and template options.
func (s *session) answered(msg tokenizer.Message, p *chatPlan, n int) (*Call, int) {
	for i := len(s.calls) - 1; i >= 0; i-- {
		c := s.calls[i]
		if !c.Reply.matches(msg) || len(c.Messages) != n {
			continue
		}
		if sameMessages(c.Messages, p.messages[:n]) && sameRaw(c.Tools, p.tools) && sameOptions(c.Options, p.options) {
			return c, s.indexes[i]
		}
	}
	return nil, -1
}

// matches reports whether msg is the reply as the client got it: the
// same content (null and "" alike) and the same tool calls (ids, names
// and arguments). Reasoning the client adds is not part of it.
func (rp *Reply) matches(msg tokenizer.Message) bool {
	if msg.Content != rp.Content || len(msg.ToolCalls) != len(rp.ToolCalls) {
		return false
	}
	for i, c := range msg.ToolCalls {
		w := rp.ToolCalls[i]
		if c.ID != w.ID || c.Function.Name != w.Name || !bytes.Equal(c.Function.Arguments, w.Arguments) {
			return false
		}
	}
	return true
}

func sameMessages(a, b []tokenizer.Message) bool {
	return reflect.DeepEqual(a, b) || len(a) == 0 && len(b) == 0
}

func sameRaw(a, b []json.RawMessage) bool {
	return slices.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) })
}

func sameOptions(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(bytes.TrimSpace(v), bytes.TrimSpace(w)) {
			return false
		}
	}
	return true
}

// errGlue: the template's rendering does not let the text after an
// assistant message be cut out.
var errGlue = errors.New("record: cannot cut the template's text after the assistant message")

// glue returns the text the template renders after the assistant
// message at position n, which call c sampled: the end of that message
// beyond what the model wrote (for Qwen's template the "\n" after
// <|im_end|>, or "<|im_end|>\n" when the model stopped without
// writing it), then every later message and the generation prompt.
//
// The message is replaced by a probe, a unique text with the same tool
// calls, and the conversation rendered twice: up to the probe (A) and
// whole (B). After the probe, A holds the message's tool calls and its
// closing, which B repeats before the later messages. The closing
// starts at A's last end-of-turn text; the model's own end-of-turn
// token, when it wrote one, stands for that text.
func (r *Recorder) glue(p *chatPlan, n int, c *Call) (string, error) {
	probe := "agentrl-probe-" + randomHex(12)
	msgs := slices.Clone(p.messages)
	msgs[n] = tokenizer.Message{Role: "assistant", Content: probe, ToolCalls: p.messages[n].ToolCalls}
	a, err := r.render(msgs[:n+1], p.tools, p.options, false)
	if err != nil {
		return "", err
	}
	b, err := r.render(msgs, p.tools, p.options, true)
	if err != nil {
		return "", err
	}
	if strings.Count(a, probe) != 1 || strings.Count(b, probe) != 1 {
		return "", errGlue
	}
	closing := a[strings.Index(a, probe)+len(probe):]
	after := b[strings.Index(b, probe)+len(probe):]
	if !strings.HasPrefix(after, closing) {
		return "", errGlue
	}
	rest := after[len(closing):]
	e := strings.LastIndex(closing, r.eot)
	if e < 0 {
		return "", fmt.Errorf("%w: the template writes no %q after an assistant message", errGlue, r.eot)
	}
	if r.endsTurn(c.Tokens) {
		e += len(r.eot)
	}
	return closing[e:] + rest, nil
}

// endsTurn reports whether the last sampled token is the end-of-turn
// token whose text the template writes.
func (r *Recorder) endsTurn(toks []int) bool {
	return len(toks) > 0 && r.cfg.Tokenizer.Decode(toks[len(toks)-1:]) == r.eot
}
