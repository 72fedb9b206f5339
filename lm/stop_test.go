package lm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feed pushes tokens with their text deltas until the checker stops.
func feed(c *StopChecker, tokens []int, deltas []string) (Stop, int, bool) {
	for i, tok := range tokens {
		if st, done := c.Next(tok, deltas[i]); done {
			return st, i, true
		}
	}
	return Stop{}, len(tokens), false
}

func TestStopChecker(t *testing.T) {
	t.Run("stop string across tokens", func(t *testing.T) {
		c := NewStopChecker(SampleParams{MaxNewTokens: 100, Stop: []string{"</answer>"}}, []int{0})
		st, at, done := feed(c, []int{5, 6, 7, 8, 9}, []string{"42 is", " it</an", "sw", "er> and", " more"})
		require.True(t, done)
		// The match completes with token 8 (index 3); the text before it
		// is "42 is it" (8 bytes).
		assert.Equal(t, 3, at)
		assert.Equal(t, Stop{Reason: FinishStop, String: "</answer>", TextEnd: 8}, st)
		assert.Equal(t, "42 is it", c.Text()[:st.TextEnd])
	})
	t.Run("earliest match wins", func(t *testing.T) {
		c := NewStopChecker(SampleParams{Stop: []string{"world", "lo w", "o"}}, nil)
		st, _, done := feed(c, []int{1}, []string{"hello world"})
		require.True(t, done)
		// "o" at 4 and "lo w" at 3: "lo w" is earlier.
		assert.Equal(t, Stop{Reason: FinishStop, String: "lo w", TextEnd: 3}, st)
	})
	t.Run("match inside one token, not before it", func(t *testing.T) {
		c := NewStopChecker(SampleParams{Stop: []string{"ab"}}, nil)
		_, _, done := feed(c, []int{1, 2}, []string{"a", "c"})
		assert.False(t, done)
		st, done := c.Next(3, "xab")
		require.True(t, done)
		assert.Equal(t, 3, st.TextEnd)
	})
	t.Run("stop token before text and length", func(t *testing.T) {
		c := NewStopChecker(SampleParams{MaxNewTokens: 2, StopTokenIDs: []int{77}, Stop: []string{"x"}}, []int{151645})
		st, at, done := feed(c, []int{1, 77}, []string{"a", "x"})
		require.True(t, done)
		assert.Equal(t, 1, at)
		assert.Equal(t, Stop{Reason: FinishStopToken, Token: 77}, st)
		c = NewStopChecker(SampleParams{MaxNewTokens: 5}, []int{151645})
		st, _, _ = feed(c, []int{3, 151645}, []string{"a", ""})
		assert.Equal(t, Stop{Reason: FinishStopToken, Token: 151645}, st)
	})
	t.Run("length", func(t *testing.T) {
		c := NewStopChecker(SampleParams{MaxNewTokens: 3}, nil)
		st, at, done := feed(c, []int{1, 2, 3, 4}, []string{"a", "b", "c", "d"})
		require.True(t, done)
		assert.Equal(t, 2, at)
		assert.Equal(t, FinishLength, st.Reason)
	})
	t.Run("empty stop strings ignored", func(t *testing.T) {
		c := NewStopChecker(SampleParams{Stop: []string{""}}, nil)
		_, _, done := feed(c, []int{1}, []string{"abc"})
		assert.False(t, done)
	})
}

// byteDecoder decodes token ids 0..255 as raw bytes, like a byte-level
// tokenizer; invalid UTF-8 stays as bytes or becomes U+FFFD.
func byteDecoder(replace bool) func([]int) string {
	return func(ids []int) string {
		b := make([]byte, len(ids))
		for i, id := range ids {
			b[i] = byte(id)
		}
		if replace {
			return strings.ToValidUTF8(string(b), "\uFFFD")
		}
		return string(b)
	}
}

func TestTextStream(t *testing.T) {
	text := "a é 漢字 🙂!"
	for _, replace := range []bool{false, true} {
		s := NewTextStream(byteDecoder(replace), nil)
		var out strings.Builder
		var deltas []string
		for _, b := range []byte(text) {
			d := s.Push(int(b))
			deltas = append(deltas, d)
			out.WriteString(d)
			// Never a partial character.
			assert.False(t, incomplete(d) && d != "", "delta %q", d)
		}
		out.WriteString(s.Flush())
		assert.Equal(t, text, out.String(), "replace=%v", replace)
		// "é" is 0xC3 0xA9: the first byte gives nothing, the second the
		// whole character.
		assert.Equal(t, []string{"a", " ", "", "é"}, deltas[:4])
	}
	// A truncated character at the end comes out of Flush as the decoder
	// renders it.
	s := NewTextStream(byteDecoder(true), nil)
	assert.Equal(t, "x", s.Push('x'))
	assert.Equal(t, "", s.Push(0xE6))
	assert.Equal(t, "\uFFFD", s.Flush())
}

// TestStopStringWithStream: a stop string split inside a multi-byte
// character still matches once the character completes.
func TestStopStringWithStream(t *testing.T) {
	s := NewTextStream(byteDecoder(true), nil)
	c := NewStopChecker(SampleParams{Stop: []string{"é!"}}, nil)
	var stop Stop
	var done bool
	for _, b := range []byte("ok é!") {
		if stop, done = c.Next(int(b), s.Push(int(b))); done {
			break
		}
	}
	require.True(t, done)
	assert.Equal(t, Stop{Reason: FinishStop, String: "é!", TextEnd: 3}, stop)
}

// TestTextStreamContext: with a decoder that drops a leading space of the
// first token (as SentencePiece does), decoding the output together with
// prompt context keeps the space; the context itself is never returned.
func TestTextStreamContext(t *testing.T) {
	words := map[int]string{1: " Hello", 2: " world", 3: "!"}
	decode := func(ids []int) string {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(words[id])
		}
		return strings.TrimPrefix(b.String(), " ")
	}
	var out strings.Builder
	s := NewTextStream(decode, []int{1})
	for _, id := range []int{2, 3} {
		out.WriteString(s.Push(id))
	}
	assert.Equal(t, " world!", out.String())
	// Without context the first space is lost, as the decoder dictates.
	out.Reset()
	s = NewTextStream(decode, nil)
	for _, id := range []int{2, 3} {
		out.WriteString(s.Push(id))
	}
	assert.Equal(t, "world!", out.String())
}
