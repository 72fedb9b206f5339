package tokenizer

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Tokenizer is what the rest of agentrl needs from a tokenizer. BPE (from a
// Hugging Face tokenizer.json) and Bytes (for tiny models and tests)
// implement it.
type Tokenizer interface {
	// Encode returns the token ids of text. Special tokens written in the
	// text (such as "<|im_end|>") are matched verbatim and encoded as their
	// ids; no BOS/EOS is added.
	Encode(text string) []int
	// Decode returns the text of ids. Ids that name no token are skipped, as
	// Hugging Face's decode does; use DecodeChecked to have them reported.
	// Byte sequences that are not valid UTF-8 (a token stream cut inside a
	// multi-byte character) become U+FFFD as in Hugging Face's decode.
	Decode(ids []int) string
	// DecodeChecked is Decode that fails with an *IDError wrapping
	// ErrUnknownID on the first id that names no token.
	DecodeChecked(ids []int) (string, error)
	// TokenBytes returns the raw bytes token id stands for (a fresh slice),
	// false if id names no token. Concatenating them is what Decode does
	// before its UTF-8 repair; StreamDecoder builds on it.
	TokenBytes(id int) ([]byte, bool)
	// VocabSize returns one more than the largest token id.
	VocabSize() int
	// TokenID returns the id of a token given as written in the vocabulary
	// (an added token's content, or a byte-level BPE token such as "Ġthe").
	TokenID(token string) (int, bool)
	// EOSIDs returns the ids that end generation, possibly none.
	EOSIDs() []int
}

// ErrUnknownID is wrapped by the errors of DecodeChecked and StreamDecoder
// for an id that names no token.
var ErrUnknownID = errors.New("tokenizer: unknown token id")

// IDError reports an id that names no token, and where it was.
type IDError struct {
	Index int // position in the ids given
	ID    int
	Size  int // the tokenizer's VocabSize
}

// Error names the id, its index in the input and the vocabulary size.
func (e *IDError) Error() string {
	return fmt.Sprintf("tokenizer: id %d at index %d names no token (vocab size %d)", e.ID, e.Index, e.Size)
}

// Unwrap makes errors.Is(err, ErrUnknownID) hold.
func (e *IDError) Unwrap() error { return ErrUnknownID }

// byteAppender is implemented by this package's tokenizers: TokenBytes
// without the copy.
type byteAppender interface {
	appendTokenBytes(dst []byte, id int) ([]byte, bool)
}

// appendBytes appends the bytes of token id to dst, for any Tokenizer.
func appendBytes(tok Tokenizer, dst []byte, id int) ([]byte, bool) {
	if a, ok := tok.(byteAppender); ok {
		return a.appendTokenBytes(dst, id)
	}
	b, ok := tok.TokenBytes(id)
	return append(dst, b...), ok
}

// decodeWith implements Decode and DecodeChecked.
func decodeWith(tok Tokenizer, ids []int, strict bool) (string, error) {
	raw := make([]byte, 0, 4*len(ids))
	for i, id := range ids {
		var ok bool
		if raw, ok = appendBytes(tok, raw, id); !ok {
			if strict {
				return "", &IDError{Index: i, ID: id, Size: tok.VocabSize()}
			}
		}
	}
	if isValidUTF8(raw) {
		return string(raw), nil
	}
	return string(appendLossyUTF8(make([]byte, 0, len(raw)+8), raw)), nil
}

// isValidUTF8 is utf8.Valid, named for the decode fast path.
func isValidUTF8(b []byte) bool { return utf8.Valid(b) }

var (
	_ Tokenizer = (*BPE)(nil)
	_ Tokenizer = (*Bytes)(nil)
)
