package dataset

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRowErrorFormat(t *testing.T) {
	cases := []struct {
		e    RowError
		want string
	}{
		{RowError{File: "a.parquet", Row: 3, Field: "prompt", Err: ErrMalformed}, "a.parquet: row 3: prompt: dataset: malformed row"},
		{RowError{File: "a.jsonl", Row: 3, Line: 5, Err: ErrMalformed}, "a.jsonl:5: dataset: malformed row"},
		{RowError{File: "a.parquet", Row: -1, Err: ErrCorruptFile}, "a.parquet: dataset: corrupt file"},
	}
	for _, c := range cases {
		assert.EqualError(t, &c.e, c.want)
	}
}
