package tokenizer

// StreamDecoder decodes a token stream one id at a time, as a sampler
// produces it, holding back the bytes of a character that is not complete
// yet. The texts returned by Next, followed by Flush, concatenate to
// Decode of all the ids, so stop strings can be searched in the text as it
// grows. Not safe for concurrent use.
type StreamDecoder struct {
	tok     Tokenizer
	pending []byte
	ids     int
}

// NewStreamDecoder starts a stream for tok.
func NewStreamDecoder(tok Tokenizer) *StreamDecoder {
	return &StreamDecoder{tok: tok, pending: make([]byte, 0, 8)}
}

// Next adds id and returns the text it completes (possibly ""). An id that
// names no token gives an *IDError (wrapping ErrUnknownID) whose Index counts
// the ids given to this stream, and changes nothing.
func (d *StreamDecoder) Next(id int) (string, error) {
	pending, ok := appendBytes(d.tok, d.pending, id)
	if !ok {
		return "", &IDError{Index: d.ids, ID: id, Size: d.tok.VocabSize()}
	}
	d.ids++
	d.pending = pending
	keep := incompleteTail(d.pending)
	done := d.pending[:len(d.pending)-keep]
	var out string
	if isValidUTF8(done) {
		out = string(done)
	} else {
		out = string(appendLossyUTF8(nil, done))
	}
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return out, nil
}

// Flush returns the held-back bytes (an unfinished character becomes
// U+FFFD, as in Decode) and empties the stream.
func (d *StreamDecoder) Flush() string {
	s := string(appendLossyUTF8(nil, d.pending))
	d.pending = d.pending[:0]
	return s
}
