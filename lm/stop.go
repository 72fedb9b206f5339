package lm

import (
	"strings"
	"unicode/utf8"
)

// Stop is the outcome of StopChecker.Next when generation must end.
type Stop struct {
	Reason FinishReason
	// Token is the stop token for FinishStopToken.
	Token int
	// String is the matched stop string for FinishStop, and TextEnd the
	// byte offset in the output text where it begins: the output text
	// with the stop string and what follows removed is Text()[:TextEnd],
	// as vLLM returns it.
	String  string
	TextEnd int
}

// StopChecker decides when a generation ends, in vLLM's order
// (vllm/v1/core/sched/utils.py, check_stop): an end-of-sequence or stop
// token first, then stop strings in the decoded text, then the token
// limit. Stop strings are searched in the text accumulated across tokens,
// so a stop string split over several tokens is found when its last part
// arrives; the earliest match wins, and among matches at the same offset
// the first listed.
type StopChecker struct {
	stopIDs map[int]bool
	stops   []string
	maxLen  int // longest stop string, in bytes
	maxNew  int
	n       int
	text    strings.Builder
}

// NewStopChecker returns a checker for params; eosIDs are the model's
// end-of-sequence tokens, added to params.StopTokenIDs.
func NewStopChecker(params SampleParams, eosIDs []int) *StopChecker {
	c := &StopChecker{stopIDs: make(map[int]bool), maxNew: params.MaxNewTokens}
	for _, id := range eosIDs {
		c.stopIDs[id] = true
	}
	for _, id := range params.StopTokenIDs {
		c.stopIDs[id] = true
	}
	for _, s := range params.Stop {
		if s == "" {
			continue // an empty stop string would match everywhere; vLLM rejects it
		}
		c.stops = append(c.stops, s)
		c.maxLen = max(c.maxLen, len(s))
	}
	return c
}

// Next records a generated token and the text it added to the output
// (from a TextStream), and reports whether generation must stop.
func (c *StopChecker) Next(token int, textDelta string) (Stop, bool) {
	c.n++
	if c.stopIDs[token] {
		return Stop{Reason: FinishStopToken, Token: token}, true
	}
	if len(c.stops) > 0 && textDelta != "" {
		prev := c.text.Len()
		c.text.WriteString(textDelta)
		text := c.text.String()
		// A new match must end in the new text: start far enough back for
		// the longest stop string to straddle the boundary.
		from := max(0, prev-c.maxLen+1)
		bestAt, best := -1, ""
		for _, s := range c.stops {
			if i := strings.Index(text[from:], s); i >= 0 && (bestAt < 0 || from+i < bestAt) {
				bestAt, best = from+i, s
			}
		}
		if bestAt >= 0 {
			return Stop{Reason: FinishStop, String: best, TextEnd: bestAt}, true
		}
	}
	if c.maxNew > 0 && c.n >= c.maxNew {
		return Stop{Reason: FinishLength}, true
	}
	return Stop{}, false
}

// Text is the output text accumulated so far (only kept when there are
// stop strings).
func (c *StopChecker) Text() string { return c.text.String() }

// TextStream turns a growing token sequence into text deltas with a
// decoder of whole sequences, the way vLLM's incremental detokenizer does
// (vllm/transformers_utils/detokenizer_utils.py,
// detokenize_incrementally): each step decodes a short window of recent
// tokens, and text that ends in an incomplete UTF-8 character (a
// byte-level token holding part of one, decoded as U+FFFD or left as
// invalid bytes) is held back until the character completes.
type TextStream struct {
	decode             func(ids []int) string
	ids                []int
	prefixOff, readOff int
}

// contextTokens is how many prompt tokens a TextStream decodes in front of
// the output, as vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET: enough
// for tokenizers whose decoding of a token depends on its left neighbour
// (SentencePiece's leading-space marker).
const contextTokens = 5

// NewTextStream returns a stream over decode, for example a tokenizer's
// Decode. context is the prompt (or its end); its last tokens are decoded
// with the output but never returned as text. It may be nil.
func NewTextStream(decode func(ids []int) string, context []int) *TextStream {
	c := context[max(0, len(context)-contextTokens):]
	ids := append(make([]int, 0, len(c)+64), c...)
	return &TextStream{decode: decode, ids: ids, readOff: len(ids)}
}

// Push appends a token and returns the text it completes, possibly empty.
func (s *TextStream) Push(id int) string {
	s.ids = append(s.ids, id)
	prefix := s.decode(s.ids[s.prefixOff:s.readOff])
	full := s.decode(s.ids[s.prefixOff:])
	if len(full) <= len(prefix) || incomplete(full) {
		return ""
	}
	s.prefixOff, s.readOff = s.readOff, len(s.ids)
	return full[len(prefix):]
}

// Flush returns the text held back (an incomplete character at the end of
// the output, as the decoder renders it).
func (s *TextStream) Flush() string {
	prefix := s.decode(s.ids[s.prefixOff:s.readOff])
	full := s.decode(s.ids[s.prefixOff:])
	s.prefixOff, s.readOff = s.readOff, len(s.ids)
	if len(full) <= len(prefix) {
		return ""
	}
	return full[len(prefix):]
}

// incomplete reports whether text ends in U+FFFD or a truncated UTF-8
// sequence.
func incomplete(text string) bool {
	r, size := utf8.DecodeLastRuneInString(text)
	// size 1: an invalid or truncated byte; size 3: a literal U+FFFD.
	return r == utf8.RuneError && size != 0
}
