package rollout

import (
	"fmt"
	"strings"
)

// Harmony parses the tool calls of gpt-oss models, written in OpenAI's
// harmony format (github.com/openai/harmony, docs/format.md): a turn is a
// run of messages, each a header, <|message|>, the content and
// <|end|>, <|call|> or <|return|>, the next one opened by
// <|start|>assistant. A message with a recipient is a tool call; the
// recipient may stand in the role part or the channel part of the
// header, and <|constrain|>json marks JSON arguments:
//
//	<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Tokyo"}<|call|>
//
// The text is the decoded turn with its special tokens, which starts in
// the header of the first message (the prompt ends with
// <|start|>assistant), or with <|start|> itself. Headers are read as
// openai-harmony reads them (StreamableParser, parse_header_from_string):
// the channel is the word after <|channel|>; of the remaining words, a
// last one starting with "to=" is the recipient, else it is the content
// type and the word before it the recipient.
//
// A call of "functions.NAME" is a call of the tool NAME; another
// recipient (a built-in tool such as "browser.search" or "python") is
// called by its full name, which the registry reports as unknown unless a
// tool has it. Arguments with a JSON content type, or none, must be a
// JSON object (empty means {}); others, and a header that names a
// recipient but cannot be read, make the call malformed (ParsedCall.Err
// wraps ErrBadToolCall). A message not yet terminated is no call.
type Harmony struct{}

// The special tokens of the harmony format (o200k_harmony).
const (
	harmonyStart     = "<|start|>"
	harmonyEnd       = "<|end|>"
	harmonyMessage   = "<|message|>"
	harmonyChannel   = "<|channel|>"
	harmonyConstrain = "<|constrain|>"
	harmonyCall      = "<|call|>"
	harmonyReturn    = "<|return|>"
)

// StopStrings returns <|call|>, which ends a turn that calls a tool (the
// model's generation config also lists it as an end-of-sequence token).
func (Harmony) StopStrings() []string { return []string{harmonyCall} }

// Parse returns the calls in text, in order.
func (Harmony) Parse(text string) []ParsedCall {
	calls, _ := harmonyCalls(text)
	return calls
}

// harmonyCalls returns the calls in text and, for each, its recipient as
// written (the author of the tool's answer).
func harmonyCalls(text string) ([]ParsedCall, []string) {
	var calls []ParsedCall
	var recipients []string
	pos, explicit := 0, false
	if strings.HasPrefix(text, harmonyStart) {
		pos, explicit = len(harmonyStart), true
	}
	for pos < len(text) {
		m := indexFrom(text, harmonyMessage, pos)
		if m < 0 {
			break
		}
		end, term := -1, ""
		for _, t := range []string{harmonyEnd, harmonyCall, harmonyReturn} {
			if k := indexFrom(text, t, m+len(harmonyMessage)); k >= 0 && (end < 0 || k < end) {
				end, term = k, t
			}
		}
		if end < 0 {
			break // the last message is not terminated
		}
		header := text[pos:m]
		rawStart := pos
		if explicit {
			rawStart -= len(harmonyStart)
		}
		raw := text[rawStart : end+len(term)]
		if k := strings.LastIndex(header, harmonyStart); k >= 0 {
			// Text between messages that did not start properly: the
			// message begins at its last <|start|>.
			header, explicit = header[k+len(harmonyStart):], true
			raw = text[pos+k : end+len(term)]
		}
		h, err := parseHarmonyHeader(header, explicit)
		switch {
		case err != nil && strings.Contains(header, "to="):
			to := header[strings.Index(header, "to=")+len("to="):]
			if k := strings.IndexFunc(to, func(r rune) bool { return r == '<' || r == ' ' || r == '\t' || r == '\n' }); k >= 0 {
				to = to[:k]
			}
			calls = append(calls, ParsedCall{Raw: raw, Err: fmt.Errorf("%w: message header %q: %v", ErrBadToolCall, header, err)})
			recipients = append(recipients, to)
		case err == nil && h.role == "assistant" && h.recipient != "":
			calls = append(calls, harmonyToolCall(raw, h, text[m+len(harmonyMessage):end]))
			recipients = append(recipients, h.recipient)
		}
		pos = end + len(term)
		if !strings.HasPrefix(text[pos:], harmonyStart) {
			break
		}
		pos += len(harmonyStart)
		explicit = true
	}
	return calls, recipients
}

type harmonyHeader struct {
	role, recipient, channel, contentType string
}

// parseHarmonyHeader reads a message header as openai-harmony does; the
// role is the header's first word when explicit (it followed <|start|>),
// else assistant.
func parseHarmonyHeader(header string, explicit bool) (harmonyHeader, error) {
	var h harmonyHeader
	if i := strings.Index(header, harmonyChannel); i >= 0 {
		after := header[i+len(harmonyChannel):]
		n := strings.IndexFunc(after, func(r rune) bool { return r == '<' || isSpace(r) })
		if n < 0 {
			n = len(after)
		}
		if n == 0 {
			return h, fmt.Errorf("no channel after %s", harmonyChannel)
		}
		h.channel = after[:n]
		header = header[:i] + after[n:]
	}
	header = strings.ReplaceAll(strings.TrimSpace(header), harmonyConstrain, " "+harmonyConstrain)
	parts := strings.Fields(header)
	h.role = "assistant"
	if explicit {
		if len(parts) == 0 {
			return h, fmt.Errorf("no role")
		}
		switch parts[0] {
		case "system", "developer", "user", "assistant", "tool":
			h.role = parts[0]
			parts = parts[1:]
		default:
			if len(parts) == 1 && !strings.HasPrefix(parts[0], "to=") {
				return h, fmt.Errorf("unknown role %q", parts[0])
			}
			h.role = "tool" // a tool's message, named by its first word
			parts = parts[1:]
		}
	} else if len(parts) > 0 && parts[0] == "assistant" {
		parts = parts[1:]
	}
	switch n := len(parts); {
	case n == 0:
	case strings.HasPrefix(parts[n-1], "to="):
		h.recipient, parts = parts[n-1][len("to="):], parts[:n-1]
	case n == 1:
		h.recipient, parts = parts[0], nil
	default:
		h.contentType = parts[n-1]
		h.recipient = strings.TrimPrefix(parts[n-2], "to=")
		parts = parts[:n-2]
	}
	if len(parts) > 0 {
		return h, fmt.Errorf("unexpected %q in the header", strings.Join(parts, " "))
	}
	return h, nil
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// harmonyToolCall is the call a message with a recipient makes.
func harmonyToolCall(raw string, h harmonyHeader, content string) ParsedCall {
	c := ParsedCall{Raw: raw, Name: strings.TrimPrefix(h.recipient, "functions.")}
	if c.Name == "" {
		c.Err = fmt.Errorf("%w: recipient %q names no tool", ErrBadToolCall, h.recipient)
		return c
	}
	if h.contentType != "" && !strings.Contains(h.contentType, "json") {
		c.Err = fmt.Errorf("%w: tool %q: arguments of content type %q are not JSON", ErrBadToolCall, c.Name, h.contentType)
		return c
	}
	args, err := objectArgs([]byte(content))
	if err != nil {
		c.Err = fmt.Errorf("%w: tool %q: %v", ErrBadToolCall, c.Name, err)
		return c
	}
	c.Arguments = args
	return c
}
