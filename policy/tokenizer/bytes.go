package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// BytesConfig describes a byte-level tokenizer. The zero value is the bare
// 256-byte vocabulary: no special tokens, no end-of-sequence token, and no
// chat template (ApplyChatTemplate returns ErrNoChatTemplate).
type BytesConfig struct {
	// Specials are named special tokens, given ids 256, 257, ... in order.
	// They are matched verbatim in Encode's input (longest first among those
	// starting at the same place).
	Specials []string
	// EOS lists the specials that end generation.
	EOS []string
	// ChatTemplate is an optional Jinja chat template for ApplyChatTemplate.
	ChatTemplate string
}

// Bytes is a tokenizer whose tokens are the 256 byte values (id = byte)
// plus named special tokens: no training, no vocabulary file, every string
// encodable. It suits tiny models and tests. Safe for concurrent use.
type Bytes struct {
	specials []string
	ids      map[string]int
	matcher  *addedMatcher
	eos      []int

	chatSrc string
	tplOnce sync.Once
	tpl     *ChatTemplate
	tplErr  error
}

// NewBytes makes a byte-level tokenizer. Specials must be non-empty and
// distinct, EOS entries must be specials.
func NewBytes(cfg BytesConfig) (*Bytes, error) {
	t := &Bytes{specials: slices.Clone(cfg.Specials), ids: make(map[string]int, len(cfg.Specials)), chatSrc: cfg.ChatTemplate}
	added := make([]AddedToken, len(cfg.Specials))
	for i, s := range cfg.Specials {
		if s == "" {
			return nil, fmt.Errorf("tokenizer: Specials[%d] is empty", i)
		}
		if _, dup := t.ids[s]; dup {
			return nil, fmt.Errorf("tokenizer: Specials[%d] %q repeats an earlier special", i, s)
		}
		t.ids[s] = 256 + i
		added[i] = AddedToken{ID: 256 + i, Content: s, Special: true}
	}
	t.matcher = newAddedMatcher(added)
	for i, s := range cfg.EOS {
		id, ok := t.ids[s]
		if !ok {
			return nil, fmt.Errorf("tokenizer: EOS[%d] %q is not among the specials", i, s)
		}
		t.eos = append(t.eos, id)
	}
	return t, nil
}

// Encode returns the bytes of text as ids, with specials written in the text
// encoded as their ids.
func (t *Bytes) Encode(text string) []int {
	out := make([]int, 0, len(text))
	t.matcher.split(text, func(tok *AddedToken, piece string) {
		if tok != nil {
			out = append(out, tok.ID)
			return
		}
		for i := 0; i < len(piece); i++ {
			out = append(out, int(piece[i]))
		}
	})
	return out
}

// EncodeBatch encodes texts in parallel on all cores.
func (t *Bytes) EncodeBatch(texts []string) [][]int { return encodeBatch(t.Encode, texts) }

// TokenBytes returns the byte of ids below 256 and a special's text above.
func (t *Bytes) TokenBytes(id int) ([]byte, bool) {
	return t.appendTokenBytes(nil, id)
}

func (t *Bytes) appendTokenBytes(dst []byte, id int) ([]byte, bool) {
	switch {
	case id >= 0 && id < 256:
		return append(dst, byte(id)), true
	case id >= 256 && id < 256+len(t.specials):
		return append(dst, t.specials[id-256]...), true
	}
	return dst, false
}

// Decode returns the text of ids, skipping ids that name no token and
// replacing bytes that are not valid UTF-8 with U+FFFD (as BPE.Decode does).
func (t *Bytes) Decode(ids []int) string {
	s, _ := decodeWith(t, ids, false)
	return s
}

// DecodeChecked is Decode that returns an *IDError for an unknown id.
func (t *Bytes) DecodeChecked(ids []int) (string, error) {
	return decodeWith(t, ids, true)
}

// VocabSize is 256 plus the number of specials.
func (t *Bytes) VocabSize() int { return 256 + len(t.specials) }

// TokenID returns the id of a special, or of a one-byte string.
func (t *Bytes) TokenID(token string) (int, bool) {
	if id, ok := t.ids[token]; ok {
		return id, true
	}
	if len(token) == 1 {
		return int(token[0]), true
	}
	return 0, false
}

// IsSpecial reports whether id is one of the named specials.
func (t *Bytes) IsSpecial(id int) bool { return id >= 256 && id < t.VocabSize() }

// EOSIDs returns the ids of the EOS specials.
func (t *Bytes) EOSIDs() []int { return slices.Clone(t.eos) }

// ApplyChatTemplate renders the configured chat template; see
// BPE.ApplyChatTemplate.
func (t *Bytes) ApplyChatTemplate(messages []Message, tools []json.RawMessage, opts ChatOptions) (string, error) {
	t.tplOnce.Do(func() {
		if t.chatSrc == "" {
			t.tplErr = ErrNoChatTemplate
			return
		}
		vars := map[string]any{}
		if len(t.eos) > 0 {
			vars["eos_token"] = t.specials[t.eos[0]-256]
		}
		t.tpl, t.tplErr = NewChatTemplate(t.chatSrc, vars)
	})
	if t.tplErr != nil {
		return "", t.tplErr
	}
	return t.tpl.Render(messages, tools, opts)
}
