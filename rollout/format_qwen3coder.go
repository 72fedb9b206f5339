package rollout

import "strings"

// Qwen3CoderResults renders tool results as Qwen3-Coder's chat template
// renders a run of tool messages after an assistant turn with tool calls:
// the turn is closed with "<|im_end|>\n" (only "\n" when the model
// already wrote <|im_end|>), the results are grouped in one user turn,
// each in <tool_response> tags on lines of their own, and the next
// assistant turn is opened:
//
//	<|im_end|>\n<|im_start|>user\n<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n
//
// It differs from ChatML (Qwen3's template) by the newlines around each
// <tool_response>; testdata/qwen3coder_chat_template.jinja is the
// template it is checked against.
type Qwen3CoderResults struct{}

// Render implements ResultFormat.
func (Qwen3CoderResults) Render(turnText string, results []string) string {
	const eot = "<|im_end|>"
	var b strings.Builder
	if !strings.HasSuffix(turnText, eot) {
		b.WriteString(eot)
	}
	b.WriteString("\n<|im_start|>user\n")
	for _, r := range results {
		b.WriteString("<tool_response>\n")
		b.WriteString(r)
		b.WriteString("\n</tool_response>\n")
	}
	b.WriteString(eot + "\n<|im_start|>assistant\n")
	return b.String()
}

// RenderMessages implements MessageFormat as Qwen3-Coder's template
// renders messages after an assistant turn: the turn closed as Render
// closes it, each user or system message as
// "<|im_start|>ROLE\nCONTENT<|im_end|>\n", a run of tool messages as
// Render groups them, then "<|im_start|>assistant\n".
func (Qwen3CoderResults) RenderMessages(turnText string, msgs []Message) (string, error) {
	const eot = "<|im_end|>"
	var b strings.Builder
	if !strings.HasSuffix(turnText, eot) {
		b.WriteString(eot)
	}
	b.WriteString("\n")
	if err := chatMLMessages(&b, msgs, eot, "user\n", "<tool_response>\n", "\n</tool_response>\n"); err != nil {
		return "", err
	}
	b.WriteString("<|im_start|>assistant\n")
	return b.String(), nil
}
