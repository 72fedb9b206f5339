package tool

import (
	"fmt"
	"unicode/utf8"
)

// TokenCodec turns text into token ids and back. policy/tokenizer's
// tokenizers satisfy it; tool does not import them.
type TokenCodec interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// DefaultOutputChars is the character budget of a tool response when an
// OutputBudget sets none.
const DefaultOutputChars = 8192

// OutputBudget bounds the text a tool returns to the model. Text over the
// budget keeps its head and its tail (half the budget each) around a marker
// that says how much was cut: the start of a traceback and its last line
// both matter to the model. The zero value is a budget of
// DefaultOutputChars characters.
type OutputBudget struct {
	// Chars is the budget in characters (Unicode code points); default
	// DefaultOutputChars. Ignored when Tokens is set.
	Chars int
	// Tokens is the budget in tokens of Tokenizer; it needs Tokenizer.
	Tokens int
	// Tokenizer counts and cuts tokens when Tokens is set.
	Tokenizer TokenCodec
}

// Validate reports a negative budget, or a token budget without a Tokenizer.
func (b OutputBudget) Validate() error {
	if b.Chars < 0 || b.Tokens < 0 {
		return fmt.Errorf("tool: OutputBudget Chars %d and Tokens %d must not be negative", b.Chars, b.Tokens)
	}
	if b.Tokens > 0 && b.Tokenizer == nil {
		return fmt.Errorf("tool: OutputBudget.Tokens = %d needs a Tokenizer", b.Tokens)
	}
	return nil
}

// Truncate returns s cut to the budget and whether it was cut. The marker
// is not counted against the budget.
func (b OutputBudget) Truncate(s string) (string, bool) {
	if b.Tokens > 0 && b.Tokenizer != nil {
		ids := b.Tokenizer.Encode(s)
		if len(ids) <= b.Tokens {
			return s, false
		}
		head := b.Tokens / 2
		tail := b.Tokens - head
		cut := len(ids) - head - tail
		return b.Tokenizer.Decode(ids[:head]) +
			fmt.Sprintf("\n...[%d tokens truncated]...\n", cut) +
			b.Tokenizer.Decode(ids[len(ids)-tail:]), true
	}
	limit := b.Chars
	if limit == 0 {
		limit = DefaultOutputChars
	}
	n := utf8.RuneCountInString(s)
	if n <= limit {
		return s, false
	}
	head := limit / 2
	tail := limit - head
	// Byte offsets of the head's end and the tail's start.
	headEnd, tailStart := 0, len(s)
	for i := 0; i < head; i++ {
		_, size := utf8.DecodeRuneInString(s[headEnd:])
		headEnd += size
	}
	for i := 0; i < tail; i++ {
		_, size := utf8.DecodeLastRuneInString(s[:tailStart])
		tailStart -= size
	}
	return s[:headEnd] + fmt.Sprintf("\n...[%d characters truncated]...\n", n-head-tail) + s[tailStart:], true
}
