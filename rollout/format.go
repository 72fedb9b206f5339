package rollout

import (
	"fmt"
	"strings"
)

// ResultFormat renders the text appended to a trajectory after an
// assistant turn that made tool calls: whatever closes the assistant turn,
// the tool results as the chat template renders tool messages, and the
// opening of the next assistant turn. The engine encodes that text and
// appends its tokens with loss mask 0; it never re-renders earlier turns.
type ResultFormat interface {
	// Render returns the text that follows the turn whose decoded text is
	// turnText, given the content of each tool result in call order.
	Render(turnText string, results []string) string
}

// MessageFormat is a ResultFormat that also renders an environment's
// other messages after an assistant turn — a simulated user's reply, a
// game's move, a system notice — as the model's chat template renders
// them. The engine appends what RenderMessages returns with loss mask 0
// when an observation holds a message that is not a tool result.
type MessageFormat interface {
	ResultFormat
	// RenderMessages returns the text that follows the turn whose decoded
	// text is turnText, given the messages (roles "user", "system" and
	// "tool") in order: whatever closes the turn, the messages, and the
	// opening of the next assistant turn. For tool messages alone it
	// returns what Render does for their contents.
	RenderMessages(turnText string, msgs []Message) (string, error)
}

// chatMLMessages renders msgs as Qwen's templates do after an assistant
// turn closed by eot: a run of tool messages as one turn of toolRole
// opened by open, each content between before and after, closed by close;
// a user or system message as a turn of its own.
func chatMLMessages(b *strings.Builder, msgs []Message, eot, toolRole, before, after string) error {
	for i, m := range msgs {
		switch m.Role {
		case "tool":
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>" + toolRole)
			}
			b.WriteString(before)
			b.WriteString(m.Content)
			b.WriteString(after)
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				b.WriteString(eot + "\n")
			}
		case "user", "system":
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + eot + "\n")
		default:
			return fmt.Errorf("message %d: role %q is not rendered after an assistant turn (want user, system or tool)", i, m.Role)
		}
	}
	return nil
}

// ChatML renders tool results as Qwen2.5/Qwen3's chat templates render a
// run of tool messages after an assistant turn with tool calls: the turn is
// closed with "<|im_end|>\n" (only "\n" when the model already wrote the
// end-of-turn token), the results are grouped in one user turn, each in
// <tool_response> tags, and a generation prompt opens the next assistant
// turn. For Qwen3 the text is
//
//	<|im_end|>\n<|im_start|>user\n<tool_response>\nR1\n</tool_response>\n<tool_response>\nR2\n</tool_response><|im_end|>\n<|im_start|>assistant\n
//
// byte for byte what the template in Qwen3's tokenizer_config.json
// renders for the messages (testdata/chat_template_cases.json).
type ChatML struct {
	// EndOfTurn closes a turn; empty means "<|im_end|>".
	EndOfTurn string
	// Role is the role of the turn holding the results; empty means
	// "user", as Qwen's templates render role "tool".
	Role string
	// GenerationPrompt opens the next assistant turn; empty means
	// "<|im_start|>assistant\n". Qwen3 with thinking disabled uses
	// "<|im_start|>assistant\n<think>\n\n</think>\n\n".
	GenerationPrompt string
}

// Render implements ResultFormat.
func (f ChatML) Render(turnText string, results []string) string {
	eot := f.EndOfTurn
	if eot == "" {
		eot = "<|im_end|>"
	}
	role := f.Role
	if role == "" {
		role = "user"
	}
	gen := f.GenerationPrompt
	if gen == "" {
		gen = "<|im_start|>assistant\n"
	}
	var b strings.Builder
	if !strings.HasSuffix(turnText, eot) {
		b.WriteString(eot)
	}
	b.WriteString("\n<|im_start|>")
	b.WriteString(role)
	for _, r := range results {
		b.WriteString("\n<tool_response>\n")
		b.WriteString(r)
		b.WriteString("\n</tool_response>")
	}
	b.WriteString(eot)
	b.WriteString("\n")
	b.WriteString(gen)
	return b.String()
}

// RenderMessages implements MessageFormat as Qwen3's template renders
// messages after an assistant turn: the turn closed as Render closes it,
// each user or system message as "<|im_start|>ROLE\nCONTENT<|im_end|>\n",
// a run of tool messages as Render groups them, then the generation
// prompt. For Qwen3 a reply after a plain turn is
//
//	<|im_end|>\n<|im_start|>user\nhigher<|im_end|>\n<|im_start|>assistant\n
func (f ChatML) RenderMessages(turnText string, msgs []Message) (string, error) {
	eot := f.EndOfTurn
	if eot == "" {
		eot = "<|im_end|>"
	}
	role := f.Role
	if role == "" {
		role = "user"
	}
	gen := f.GenerationPrompt
	if gen == "" {
		gen = "<|im_start|>assistant\n"
	}
	var b strings.Builder
	if !strings.HasSuffix(turnText, eot) {
		b.WriteString(eot)
	}
	b.WriteString("\n")
	if err := chatMLMessages(&b, msgs, eot, role, "\n<tool_response>\n", "\n</tool_response>"); err != nil {
		return "", err
	}
	b.WriteString(gen)
	return b.String(), nil
}

// Tagged renders each result between Open and Close and continues the same
// assistant turn, as ReTool-style agents read interpreter output inside
// their own turn: "<interpreter>\nR\n</interpreter>\n" by default.
type Tagged struct {
	// Open and Close wrap each result; empty means "<interpreter>\n" and
	// "\n</interpreter>\n".
	Open, Close string
}

// Render implements ResultFormat.
func (f Tagged) Render(_ string, results []string) string {
	open, close := f.Open, f.Close
	if open == "" {
		open = "<interpreter>\n"
	}
	if close == "" {
		close = "\n</interpreter>\n"
	}
	var b strings.Builder
	for _, r := range results {
		b.WriteString(open)
		b.WriteString(r)
		b.WriteString(close)
	}
	return b.String()
}
