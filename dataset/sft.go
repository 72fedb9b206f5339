package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/agentrl/agentrl/policy/tokenizer"
)

// Conversation is one SFT sample: a chat in the OpenAI / Hugging Face layout
// (system, user, assistant and tool messages; assistant tool calls and
// reasoning_content) and the tool schemas the chat template lists, as verl's
// MultiTurnSFTDataset reads them from the messages and tools columns.
type Conversation struct {
	// Source and Row say where the conversation was read (file and 0-based
	// record); they label errors.
	Source string
	Row    int64
	// Messages are the turns, in order. Tool-call arguments and tool
	// schemas are raw JSON, so that their key order survives rendering.
	Messages []tokenizer.Message
	// Tools are OpenAI function schemas, nil when the sample has none.
	Tools []json.RawMessage
}

// ChatTokenizer is what SFT encoding needs: a tokenizer that also renders
// its chat template. *tokenizer.BPE and *tokenizer.Bytes implement it.
type ChatTokenizer interface {
	tokenizer.Tokenizer
	ApplyChatTemplate(messages []tokenizer.Message, tools []json.RawMessage, opts tokenizer.ChatOptions) (string, error)
}

// Truncation says what happens to an over-long SFT sample (verl's
// data.truncation).
type Truncation string

// Truncation modes of SFTConfig.Truncation.
const (
	TruncateError Truncation = "error" // an over-long sample is an error wrapping ErrTooLong
	TruncateLeft  Truncation = "left"  // keep the last MaxLength tokens
	TruncateRight Truncation = "right" // keep the first MaxLength tokens
)

// SFTConfig says how conversations become token ids and loss masks. The
// zero value is usable: no length bound, every assistant message trained
// on, the prefix strategy with the turn strategy as fallback, the
// tokenizer's EOS text closing a turn and the chat template's default
// options.
type SFTConfig struct {
	// MaxLength bounds the tokens of a sample; 0 means no bound. verl's
	// data.max_length.
	MaxLength int
	// Truncation is what happens to a sample over MaxLength: "error" (also
	// when empty), "left" or "right", as verl's data.truncation. Ids and
	// mask are cut together after masking, so a cut can leave a sample with
	// few or no masked tokens (SFTExample.MaskedTokens says how many).
	Truncation Truncation
	// LastTurnOnly masks only the last assistant message; otherwise every
	// assistant message is trained on (verl's MultiTurnSFTDataset default).
	LastTurnOnly bool
	// ChatOptions are passed to the chat template, e.g. Vars
	// {"enable_thinking": false}. AddGenerationPrompt is ignored: a
	// training sample is rendered without it.
	ChatOptions tokenizer.ChatOptions
	// Strategy picks how assistant spans are found: "" tries
	// StrategyPrefix and falls back to StrategyTurns; StrategyPrefix or
	// StrategyTurns uses only that one. The prefix strategy renders the
	// template 2k+1 times for k assistant messages (each rendering as long
	// as the prefix), the turn strategy twice: prefer it for trajectories
	// with many tool calls.
	Strategy SpanStrategy
	// EndOfTurn lists the strings that close an assistant turn; the mask
	// ends after the last of them inside the turn, so that template glue
	// after it (Qwen's "\n" after "<|im_end|>") stays unmasked. Empty means
	// the text of the tokenizer's EOS tokens.
	EndOfTurn []string
}

// SpanStrategy names how the assistant spans of a sample are found.
type SpanStrategy string

// Span strategies of SFTConfig.Strategy, reported by SFTExample.Strategy.
const (
	// StrategyPrefix: each assistant message's span came from rendering
	// the prefixes messages[:i] (with the generation prompt) and
	// messages[:i+1], both string prefixes of the full rendering.
	StrategyPrefix SpanStrategy = "prefix"
	// StrategyTurns: some prefix rendering was not a string prefix of the
	// full rendering (Qwen3 drops earlier turns' reasoning and adds empty
	// think blocks to a last turn), so the spans were found in the full
	// rendering by its turn delimiters: the k-th generation-prompt header
	// opens the k-th assistant message, which runs to the first end-of-turn
	// string after it.
	StrategyTurns SpanStrategy = "turns"
)

// TurnSpan locates one assistant message in a sample.
type TurnSpan struct {
	// Message is the index of the assistant message in Conversation.Messages.
	Message int
	// ByteStart and ByteEnd bound the trained text in SFTExample.Text
	// (before truncation).
	ByteStart, ByteEnd int
	// TokenStart and TokenEnd bound its tokens in InputIDs after
	// truncation (clipped; equal when truncation removed the turn).
	TokenStart, TokenEnd int
	// Masked says whether the turn is trained on (false for earlier turns
	// under LastTurnOnly).
	Masked bool
}

// SFTExample is a tokenized SFT sample.
type SFTExample struct {
	Source string
	Row    int64
	// InputIDs are the token ids of the chat template's rendering of the
	// whole conversation (Text), after truncation.
	InputIDs []int
	// LossMask is 1 on the tokens the model is trained to produce and 0
	// elsewhere; len(LossMask) == len(InputIDs).
	LossMask []float32
	// Text is the full rendering, before truncation.
	Text string
	// Turns lists the assistant messages, in order.
	Turns []TurnSpan
	// Strategy is StrategyPrefix or StrategyTurns.
	Strategy SpanStrategy
	// Truncated is how many tokens truncation removed.
	Truncated int
}

// MaskedTokens counts the tokens with mask 1.
func (e SFTExample) MaskedTokens() int {
	n := 0
	for _, m := range e.LossMask {
		if m != 0 {
			n++
		}
	}
	return n
}

// Errors of SFT encoding; *SFTError wraps them.
var (
	// ErrEmptyConversation: no messages.
	ErrEmptyConversation = errors.New("dataset: empty conversation")
	// ErrNoAssistant: no assistant message, so nothing to train on.
	ErrNoAssistant = errors.New("dataset: conversation has no assistant message")
	// ErrUnknownRole: a role other than system, user, assistant and tool.
	ErrUnknownRole = errors.New("dataset: unknown role")
	// ErrBadToolCall: a tool call without a function name, or with
	// arguments that are neither a JSON object nor a JSON string.
	ErrBadToolCall = errors.New("dataset: malformed tool call")
	// ErrTooLong: a sample over SFTConfig.MaxLength with truncation "error".
	ErrTooLong = errors.New("dataset: sample longer than max length")
	// ErrTemplateMismatch: the assistant messages could not be located in
	// the rendering by either strategy.
	ErrTemplateMismatch = errors.New("dataset: assistant turn not found in chat template rendering")
	// ErrTokenAlignment: a span boundary falls inside what the tokenizer
	// encodes as one unit, and the text's tokens cannot be mapped back to
	// byte offsets.
	ErrTokenAlignment = errors.New("dataset: token boundaries do not align with turn boundaries")
)

// SFTError names the conversation (source, row) and, when it applies, the
// message an SFT encoding error is about.
type SFTError struct {
	Source  string
	Row     int64
	Message int // index in Conversation.Messages, -1 when not about one message
	Err     error
}

// Error formats "source: row N: messages[i]: cause".
func (e *SFTError) Error() string {
	s := fmt.Sprintf("%s: row %d", e.Source, e.Row)
	if e.Source == "" {
		s = fmt.Sprintf("conversation %d", e.Row)
	}
	if e.Message >= 0 {
		s += fmt.Sprintf(": messages[%d]", e.Message)
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *SFTError) Unwrap() error { return e.Err }

// SFTEncoder turns conversations into token ids and loss masks. It is safe
// for concurrent use.
type SFTEncoder struct {
	tok       ChatTokenizer
	cfg       SFTConfig
	endOfTurn []string
}

// NewSFTEncoder checks cfg and returns an encoder over tok.
func NewSFTEncoder(tok ChatTokenizer, cfg SFTConfig) (*SFTEncoder, error) {
	if tok == nil {
		return nil, errors.New("dataset: nil tokenizer")
	}
	switch cfg.Truncation {
	case "":
		cfg.Truncation = TruncateError
	case TruncateError, TruncateLeft, TruncateRight:
	default:
		return nil, fmt.Errorf("dataset: truncation %q: want %q, %q or %q", cfg.Truncation, TruncateError, TruncateLeft, TruncateRight)
	}
	switch cfg.Strategy {
	case "", StrategyPrefix, StrategyTurns:
	default:
		return nil, fmt.Errorf("dataset: span strategy %q: want \"\", %q or %q", cfg.Strategy, StrategyPrefix, StrategyTurns)
	}
	if cfg.MaxLength < 0 {
		return nil, fmt.Errorf("dataset: max length %d is negative", cfg.MaxLength)
	}
	cfg.ChatOptions.AddGenerationPrompt = false
	eot := cfg.EndOfTurn
	if len(eot) == 0 {
		for _, id := range tok.EOSIDs() {
			if b, ok := tok.TokenBytes(id); ok && len(b) > 0 {
				eot = append(eot, string(b))
			}
		}
	}
	for _, s := range eot {
		if s == "" {
			return nil, errors.New("dataset: empty end-of-turn string")
		}
	}
	return &SFTEncoder{tok: tok, cfg: cfg, endOfTurn: eot}, nil
}

// Encode renders conv with the chat template, tokenizes the rendering once,
// and masks the assistant messages.
//
// What is masked (1): for each assistant message (or only the last, with
// LastTurnOnly), every token that overlaps the text the model must produce —
// from the end of the generation-prompt header ("<|im_start|>assistant\n"
// for Qwen; including "<think>\n\n</think>\n\n" when enable_thinking is false,
// which the generation prompt itself writes) through the end-of-turn token
// ("<|im_end|>"): reasoning as rendered, content, tool-call markup. Unmasked
// (0): system, user and tool turns, headers, and the glue after the
// end-of-turn token. Reasoning that the template drops from earlier turns is
// not in the sample at all. A token that straddles a span boundary is
// masked, as transformers' return_assistant_tokens_mask does (it maps the
// first and last character of a span to their tokens).
//
// Spans come from prefix renderings (StrategyPrefix), as verl's earlier
// MultiTurnSFTDataset found them; when a prefix rendering is not a prefix of
// the full rendering, from the turn delimiters (StrategyTurns); when neither
// works, an error wrapping ErrTemplateMismatch names the message. See
// SFTConfig.Strategy to use one of them only.
func (e *SFTEncoder) Encode(conv Conversation) (SFTExample, error) {
	fail := func(msg int, err error) (SFTExample, error) {
		return SFTExample{}, &SFTError{Source: conv.Source, Row: conv.Row, Message: msg, Err: err}
	}
	assistants, msg, err := checkConversation(conv.Messages)
	if err != nil {
		return fail(msg, err)
	}
	opts := e.cfg.ChatOptions
	full, err := e.tok.ApplyChatTemplate(conv.Messages, conv.Tools, opts)
	if err != nil {
		return fail(-1, err)
	}
	var (
		spans    []byteSpan
		strategy = StrategyTurns
	)
	if e.cfg.Strategy != StrategyTurns {
		var perr error
		spans, strategy, msg, perr = e.prefixSpans(conv, full, assistants)
		if perr != nil && e.cfg.Strategy == StrategyPrefix {
			return fail(msg, fmt.Errorf("%w: prefix rendering: %v", ErrTemplateMismatch, perr))
		}
		if perr != nil {
			var terr error
			if spans, terr = e.turnSpans(conv, full, assistants); terr != nil {
				return fail(msg, fmt.Errorf("%w: prefix rendering: %v; turn delimiters: %v", ErrTemplateMismatch, perr, terr))
			}
			strategy = StrategyTurns
		}
	} else {
		var terr error
		if spans, terr = e.turnSpans(conv, full, assistants); terr != nil {
			return fail(-1, fmt.Errorf("%w: turn delimiters: %v", ErrTemplateMismatch, terr))
		}
	}
	ids := e.tok.Encode(full)
	offsets, err := e.tokenOffsets(full, ids, spans)
	if err != nil {
		return fail(-1, err)
	}
	ex := SFTExample{Source: conv.Source, Row: conv.Row, Text: full, Strategy: strategy}
	mask := make([]float32, len(ids))
	ex.Turns = make([]TurnSpan, len(spans))
	for k, sp := range spans {
		// Tokens overlapping [start, end): offsets[t] < end && offsets[t+1] > start.
		ts := tokenAtOrAfter(offsets, sp.start)
		te := ts
		for te < len(ids) && offsets[te] < sp.end {
			te++
		}
		masked := !e.cfg.LastTurnOnly || k == len(spans)-1
		if masked {
			for t := ts; t < te; t++ {
				mask[t] = 1
			}
		}
		ex.Turns[k] = TurnSpan{Message: sp.msg, ByteStart: sp.start, ByteEnd: sp.end, TokenStart: ts, TokenEnd: te, Masked: masked}
	}
	ex.InputIDs, ex.LossMask = ids, mask
	if n := e.cfg.MaxLength; n > 0 && len(ids) > n {
		cut := len(ids) - n
		switch e.cfg.Truncation {
		case TruncateError:
			return fail(-1, fmt.Errorf("%w: %d tokens, max %d", ErrTooLong, len(ids), n))
		case TruncateLeft:
			ex.InputIDs, ex.LossMask = ids[cut:], mask[cut:]
			for k := range ex.Turns {
				tr := &ex.Turns[k]
				tr.TokenStart, tr.TokenEnd = max(tr.TokenStart-cut, 0), max(tr.TokenEnd-cut, 0)
			}
		case TruncateRight:
			ex.InputIDs, ex.LossMask = ids[:n], mask[:n]
			for k := range ex.Turns {
				tr := &ex.Turns[k]
				tr.TokenStart, tr.TokenEnd = min(tr.TokenStart, n), min(tr.TokenEnd, n)
			}
		}
		ex.Truncated = cut
	}
	return ex, nil
}

// tokenAtOrAfter returns the first token whose end is past byte start: the
// token that contains start, or len(offsets)-1 when start is at the end.
func tokenAtOrAfter(offsets []int, start int) int {
	lo, hi := 0, len(offsets)-1 // token t spans [offsets[t], offsets[t+1])
	for lo < hi {
		mid := (lo + hi) / 2
		if offsets[mid+1] <= start {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// EncodeBatch encodes convs on up to GOMAXPROCS goroutines; out[i] is
// Encode(convs[i]). The first error to occur stops the batch and is
// returned; so is ctx's error when it is cancelled.
func (e *SFTEncoder) EncodeBatch(ctx context.Context, convs []Conversation) ([]SFTExample, error) {
	out := make([]SFTExample, len(convs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range convs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			ex, err := e.Encode(convs[i])
			out[i] = ex
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// byteSpan is an assistant message's trained text in the full rendering.
type byteSpan struct {
	msg        int
	start, end int
}

// checkConversation validates the messages and returns the indices of the
// assistant messages; on error, the index of the offending message (-1 when
// none).
func checkConversation(msgs []tokenizer.Message) ([]int, int, error) {
	if len(msgs) == 0 {
		return nil, -1, ErrEmptyConversation
	}
	var assistants []int
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "tool":
			if len(m.ToolCalls) > 0 {
				return nil, i, fmt.Errorf("%w: %s message has tool_calls", ErrBadToolCall, m.Role)
			}
		case "assistant":
			assistants = append(assistants, i)
			for j, tc := range m.ToolCalls {
				if err := checkToolCall(tc); err != nil {
					return nil, i, fmt.Errorf("tool_calls[%d]: %w", j, err)
				}
			}
		default:
			return nil, i, fmt.Errorf("%w %q (want system, user, assistant or tool)", ErrUnknownRole, m.Role)
		}
	}
	if len(assistants) == 0 {
		return nil, -1, ErrNoAssistant
	}
	return assistants, -1, nil
}

func checkToolCall(tc tokenizer.ToolCall) error {
	if tc.Type != "" && tc.Type != "function" {
		return fmt.Errorf("%w: type %q (want \"function\")", ErrBadToolCall, tc.Type)
	}
	if tc.Function.Name == "" {
		return fmt.Errorf("%w: empty function name", ErrBadToolCall)
	}
	args := strings.TrimSpace(string(tc.Function.Arguments))
	if args == "" {
		return nil // rendered as {}
	}
	if !json.Valid([]byte(args)) {
		return fmt.Errorf("%w: function.arguments is not JSON", ErrBadToolCall)
	}
	if args[0] != '{' && args[0] != '"' {
		return fmt.Errorf("%w: function.arguments: want a JSON object or string, got %.40s", ErrBadToolCall, args)
	}
	return nil
}

// prefixSpans finds each assistant message's span from prefix renderings:
// it starts where render(messages[:i], generation prompt) ends and ends
// after the last end-of-turn string in render(messages[:i+1]). Both must be
// string prefixes of full; otherwise the error names the message.
func (e *SFTEncoder) prefixSpans(conv Conversation, full string, assistants []int) ([]byteSpan, SpanStrategy, int, error) {
	withGen := e.cfg.ChatOptions
	withGen.AddGenerationPrompt = true
	spans := make([]byteSpan, 0, len(assistants))
	for _, i := range assistants {
		if i == 0 {
			return nil, "", i, errors.New("conversation starts with an assistant message: no prefix to render")
		}
		pre, err := e.tok.ApplyChatTemplate(conv.Messages[:i], conv.Tools, withGen)
		if err != nil {
			return nil, "", i, err
		}
		if !strings.HasPrefix(full, pre) {
			return nil, "", i, errors.New("rendering of the messages before it, with the generation prompt, is not a prefix of the full rendering")
		}
		post, err := e.tok.ApplyChatTemplate(conv.Messages[:i+1], conv.Tools, e.cfg.ChatOptions)
		if err != nil {
			return nil, "", i, err
		}
		if !strings.HasPrefix(full, post) || len(post) < len(pre) {
			return nil, "", i, errors.New("rendering of the messages through it is not a prefix of the full rendering")
		}
		end := len(post)
		if k := e.lastEndOfTurn(post[len(pre):]); k >= 0 {
			end = len(pre) + k
		}
		spans = append(spans, byteSpan{msg: i, start: len(pre), end: end})
	}
	return spans, StrategyPrefix, -1, nil
}

// lastEndOfTurn returns the offset just past the last end-of-turn string in
// s, or -1.
func (e *SFTEncoder) lastEndOfTurn(s string) int {
	best := -1
	for _, t := range e.endOfTurn {
		if k := strings.LastIndex(s, t); k >= 0 && k+len(t) > best {
			best = k + len(t)
		}
	}
	return best
}

// firstEndOfTurn returns the offset just past the first end-of-turn string
// in s, or -1.
func (e *SFTEncoder) firstEndOfTurn(s string) int {
	best := -1
	for _, t := range e.endOfTurn {
		if k := strings.Index(s, t); k >= 0 && (best < 0 || k+len(t) < best) {
			best = k + len(t)
		}
	}
	return best
}

// turnSpans finds the assistant messages in full by the template's turn
// delimiters: the generation prompt (what add_generation_prompt appends)
// opens each assistant turn, and the first end-of-turn string closes it. The
// number of headers must equal the number of assistant messages.
func (e *SFTEncoder) turnSpans(conv Conversation, full string, assistants []int) ([]byteSpan, error) {
	withGen := e.cfg.ChatOptions
	withGen.AddGenerationPrompt = true
	prompted, err := e.tok.ApplyChatTemplate(conv.Messages, conv.Tools, withGen)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(prompted, full) || len(prompted) == len(full) {
		return nil, errors.New("the generation prompt does not extend the rendering")
	}
	if len(e.endOfTurn) == 0 {
		return nil, errors.New("no end-of-turn string (the tokenizer has no EOS token; set SFTConfig.EndOfTurn)")
	}
	header := prompted[len(full):]
	if n := strings.Count(full, header); n != len(assistants) {
		return nil, fmt.Errorf("%d assistant messages but the header %q occurs %d times", len(assistants), header, n)
	}
	spans := make([]byteSpan, 0, len(assistants))
	pos := 0
	for _, i := range assistants {
		k := strings.Index(full[pos:], header)
		start := pos + k + len(header)
		d := e.firstEndOfTurn(full[start:])
		if d < 0 {
			return nil, fmt.Errorf("messages[%d]: no end-of-turn string after its header", i)
		}
		spans = append(spans, byteSpan{msg: i, start: start, end: start + d})
		pos = start + d
	}
	return spans, nil
}

// tokenOffsets returns the byte offset in text where each token of ids
// starts, plus len(text) at the end. Byte-level tokens spell the text
// exactly, so the offsets are the running lengths of the tokens' bytes,
// unless normalization (NFC) changed the text: then the text is encoded
// again segment by segment, split at the span boundaries, and the segments'
// ids must concatenate to ids — true when each boundary is also a boundary
// of the tokenizer's own splitting (special tokens, pre-tokenizer pieces).
func (e *SFTEncoder) tokenOffsets(text string, ids []int, spans []byteSpan) ([]int, error) {
	offsets := make([]int, len(ids)+1)
	pos := 0
	var buf []byte
	exact := true
	for t, id := range ids {
		offsets[t] = pos
		var ok bool
		buf, ok = appendToken(e.tok, buf[:0], id)
		if !ok || pos+len(buf) > len(text) || text[pos:pos+len(buf)] != string(buf) {
			exact = false
			break
		}
		pos += len(buf)
	}
	if exact && pos == len(text) {
		offsets[len(ids)] = pos
		return offsets, nil
	}
	// Segment by segment.
	cuts := make([]int, 0, 2*len(spans)+2)
	cuts = append(cuts, 0)
	for _, sp := range spans {
		cuts = append(cuts, sp.start, sp.end)
	}
	cuts = append(cuts, len(text))
	t := 0
	for k := 0; k+1 < len(cuts); k++ {
		a, b := cuts[k], cuts[k+1]
		if b < a {
			return nil, fmt.Errorf("%w: spans out of order", ErrTokenAlignment)
		}
		seg := e.tok.Encode(text[a:b])
		for _, id := range seg {
			if t >= len(ids) || ids[t] != id {
				return nil, fmt.Errorf("%w: at byte %d the text's tokens differ from its segments' tokens", ErrTokenAlignment, a)
			}
			offsets[t] = a // all tokens of a segment lie within [a, b)
			t++
		}
		// Give the segment's tokens increasing offsets inside it so that
		// overlap tests stay exact at the segment's ends.
		if n := len(seg); n > 0 {
			for j := 1; j < n; j++ {
				offsets[t-n+j] = min(a+j, b-1)
			}
		}
	}
	if t != len(ids) {
		return nil, fmt.Errorf("%w: segments give %d tokens, the text %d", ErrTokenAlignment, t, len(ids))
	}
	offsets[len(ids)] = len(text)
	return offsets, nil
}

func appendToken(tok tokenizer.Tokenizer, dst []byte, id int) ([]byte, bool) {
	b, ok := tok.TokenBytes(id)
	return append(dst, b...), ok
}
