package search

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// MaxCorpusLine is the longest corpus line ReadCorpus accepts, in bytes.
const MaxCorpusLine = 16 << 20

// ErrEmptyCorpus is returned by ReadCorpus for a corpus without a
// document.
var ErrEmptyCorpus = errors.New("search: the corpus has no documents")

// ReadCorpus reads a corpus in Search-R1's JSON Lines format — one
// {"id": ..., "contents": "\"Title\"\ntext"} object per line, other
// fields kept — and calls fn with each document and its line number
// (1-based), in order. Blank lines, a UTF-8 byte order mark and CRLF line
// ends are accepted. Each document's Raw is the line's object compacted
// (no insignificant white space), which is what a server returns.
//
// A line that is not a JSON object, has no string "contents", an "id"
// that is neither a string nor an integer, bytes that are not UTF-8, or
// more than MaxCorpusLine bytes is an error naming the line and wrapping
// ErrMalformed; a corpus without a document is ErrEmptyCorpus. An error
// fn returns stops the reading and is returned as it is.
func ReadCorpus(r io.Reader, fn func(line int, doc Document) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	n, docs := 0, 0
	for {
		line, err := readLine(br, buf[:0])
		buf = line
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLineTooLong) {
				return fmt.Errorf("%w: corpus line %d is longer than %d bytes", ErrMalformed, n+1, MaxCorpusLine)
			}
			return fmt.Errorf("search: reading the corpus after line %d: %w", n, err)
		}
		if len(line) > 0 || err == nil {
			n++
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(bytes.TrimSpace(line)) > 0 {
			doc, perr := corpusDocument(line)
			if perr != nil {
				return fmt.Errorf("corpus line %d: %w", n, perr)
			}
			docs++
			if ferr := fn(n, doc); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if docs == 0 {
		return ErrEmptyCorpus
	}
	return nil
}

var errLineTooLong = errors.New("line too long")

// readLine appends the next line of br to buf, without its "\n" or
// "\r\n". It returns io.EOF with the last line when the input ends.
func readLine(br *bufio.Reader, buf []byte) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > MaxCorpusLine+2 {
			return buf, errLineTooLong
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			buf = bytes.TrimSuffix(buf[:len(buf)-1], []byte("\r"))
			if len(buf) > MaxCorpusLine {
				return buf, errLineTooLong
			}
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return bytes.TrimSuffix(buf, []byte("\r")), err
		}
	}
}

// corpusDocument parses one corpus line into a Document whose Raw is the
// compacted object, in memory of its own.
func corpusDocument(line []byte) (Document, error) {
	if !utf8.Valid(line) {
		return Document{}, fmt.Errorf("%w: the line is not valid UTF-8", ErrMalformed)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, line); err != nil {
		return Document{}, fmt.Errorf("%w: not JSON: %v", ErrMalformed, err)
	}
	return ParseDocument(compact.Bytes())
}
