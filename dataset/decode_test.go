package dataset

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRowErrorFormat(t *testing.T) {
	cases := []struct {
		e    RowError
		want string
	}{
		{RowError{File: "a.parquet", Row: 3, Field: "prompt", Err: ErrMalformed}, "a.parquet: row 3: dataset: malformed row: field prompt"},
		{RowError{File: "a.jsonl", Row: 3, Line: 5, Err: ErrMalformed}, "a.jsonl:5: dataset: malformed row"},
		{RowError{File: "a.parquet", Row: -1, Err: ErrCorruptFile}, "a.parquet: dataset: corrupt file"},
		// The kind of fault first, then the field, then the detail.
		{RowError{File: "t.jsonl", Row: 0, Line: 1, Field: "question", Err: fmt.Errorf("%w: missing (the row has prompt)", ErrMalformed)}, "t.jsonl:1: dataset: malformed row: field question: missing (the row has prompt)"},
		{RowError{File: "c.parquet", Row: 7, Field: "prompt", Err: fmt.Errorf("%w: page 2: %w", ErrCorruptFile, io.ErrUnexpectedEOF)}, "c.parquet: row 7: dataset: corrupt file: field prompt: page 2: unexpected EOF"},
		// A cause of another kind keeps its text after the field.
		{RowError{File: "x.jsonl", Row: 1, Line: 2, Field: "prompt", Err: io.ErrUnexpectedEOF}, "x.jsonl:2: field prompt: unexpected EOF"},
		// A cause whose text merely starts like a kind is not taken for one.
		{RowError{File: "y.jsonl", Row: 0, Line: 1, Field: "f", Err: errors.New("dataset: malformed row: forged")}, "y.jsonl:1: field f: dataset: malformed row: forged"},
	}
	for _, c := range cases {
		assert.EqualError(t, &c.e, c.want)
	}
}
