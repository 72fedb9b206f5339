package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestBytes(t testing.TB) *Bytes {
	t.Helper()
	tok, err := NewBytes(BytesConfig{
		Specials: []string{"<|im_start|>", "<|im_end|>", "<|im", "<tool_call>"},
		EOS:      []string{"<|im_end|>"},
		ChatTemplate: "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
			"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
	})
	require.NoError(t, err)
	return tok
}

func TestBytesEncodeDecode(t *testing.T) {
	tok := newTestBytes(t)
	var _ Tokenizer = tok
	var _ Tokenizer = (*BPE)(nil)
	// Ids by hand: specials are 256.. in order; other bytes are themselves.
	// "<|im" is a prefix of "<|im_start|>": the longest special wins, and
	// "<|im" alone still matches where nothing longer does.
	got := tok.Encode("<|im_start|>hé<|im<|im_end|>")
	want := []int{256, 'h', 0xC3, 0xA9, 258, 257}
	require.Equal(t, want, got)
	assert.Equal(t, "<|im_start|>hé<|im<|im_end|>", tok.Decode(got))
	assert.Equal(t, 260, tok.VocabSize())
	assert.Equal(t, []int{257}, tok.EOSIDs())
	id, ok := tok.TokenID("<tool_call>")
	assert.True(t, ok)
	assert.Equal(t, 259, id)
	id, ok = tok.TokenID("A")
	assert.True(t, ok)
	assert.Equal(t, 65, id)
	_, ok = tok.TokenID("AB")
	assert.False(t, ok)
	assert.True(t, tok.IsSpecial(257))
	assert.False(t, tok.IsSpecial(255))
	assert.Empty(t, tok.Encode(""))

	// A cut multi-byte character decodes to U+FFFD, like BPE.Decode.
	assert.Equal(t, "h\uFFFD", tok.Decode([]int{'h', 0xC3}))
	_, err := tok.DecodeChecked([]int{'h', 260})
	require.ErrorIs(t, err, ErrUnknownID)
	assert.Equal(t, "h", tok.Decode([]int{'h', -1, 260}))

	batch := tok.EncodeBatch([]string{"a", "<|im_end|>", ""})
	assert.Equal(t, [][]int{{'a'}, {257}, {}}, batch)
}

func TestBytesConfigErrors(t *testing.T) {
	_, err := NewBytes(BytesConfig{Specials: []string{"<a>", ""}})
	require.ErrorContains(t, err, "Specials[1] is empty")
	_, err = NewBytes(BytesConfig{Specials: []string{"<a>", "<a>"}})
	require.ErrorContains(t, err, `Specials[1] "<a>" repeats`)
	_, err = NewBytes(BytesConfig{Specials: []string{"<a>"}, EOS: []string{"<b>"}})
	require.ErrorContains(t, err, `EOS[0] "<b>" is not among the specials`)
}

func TestBytesChatTemplate(t *testing.T) {
	tok := newTestBytes(t)
	out, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "2+2?"}}, nil, ChatOptions{AddGenerationPrompt: true})
	require.NoError(t, err)
	assert.Equal(t, "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", out)

	plain, err := NewBytes(BytesConfig{})
	require.NoError(t, err)
	_, err = plain.ApplyChatTemplate(nil, nil, ChatOptions{})
	require.ErrorIs(t, err, ErrNoChatTemplate)
}
