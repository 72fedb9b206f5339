package search

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type line struct {
	n   int
	doc Document
}

func readAll(t *testing.T, corpus string) ([]line, error) {
	t.Helper()
	var got []line
	err := ReadCorpus(strings.NewReader(corpus), func(n int, d Document) error {
		got = append(got, line{n, d})
		return nil
	})
	return got, err
}

func TestReadCorpus(t *testing.T) {
	// Search-R1's example/corpus.jsonl writes rows as json.dumps does:
	// ", " and ": " separators, non-ASCII escaped.
	corpus := "\xef\xbb\xbf" + `{"id": "0", "contents": "\"Evan Morris\"\nEvan L. Morris (January 26, 1977 \u2013 July 9, 2015) was a lobbyist."}` + "\r\n" +
		"\n" +
		`  {"id": 1, "contents": "\"B\"\nb", "source": "wiki"}  ` + "\n" +
		`{"contents": "no id, no final newline"}`
	got, err := readAll(t, corpus)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, 1, got[0].n)
	assert.Equal(t, "0", got[0].doc.ID)
	assert.Equal(t, "\"Evan Morris\"\nEvan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist.", got[0].doc.Contents)
	assert.Equal(t, `{"id":"0","contents":"\"Evan Morris\"\nEvan L. Morris (January 26, 1977 \u2013 July 9, 2015) was a lobbyist."}`, string(got[0].doc.Raw))
	assert.Equal(t, 3, got[1].n)
	assert.Equal(t, "1", got[1].doc.ID)
	assert.Equal(t, `{"id":1,"contents":"\"B\"\nb","source":"wiki"}`, string(got[1].doc.Raw))
	assert.Equal(t, 4, got[2].n)
	assert.Equal(t, "", got[2].doc.ID)
	assert.Equal(t, "no id, no final newline", got[2].doc.Contents)

	// A reader that returns a byte at a time gives the same documents.
	var again []Document
	require.NoError(t, ReadCorpus(iotest.OneByteReader(strings.NewReader(corpus)), func(_ int, d Document) error {
		again = append(again, d)
		return nil
	}))
	require.Len(t, again, 3)
	assert.Equal(t, got[2].doc, again[2])
}

func TestReadCorpusErrors(t *testing.T) {
	long := `{"contents": "` + strings.Repeat("x", MaxCorpusLine) + `"}`
	tests := []struct {
		name, corpus string
		want         error
		text         string
	}{
		{"empty", "", ErrEmptyCorpus, "no documents"},
		{"blank", "\n \r\n\t\n", ErrEmptyCorpus, "no documents"},
		{"not JSON on line 3", `{"contents": "a"}` + "\n\n{", ErrMalformed, "corpus line 3"},
		{"no contents", `{"id": "0", "title": "T", "text": "x"}`, ErrMalformed, `no string "contents"`},
		{"contents null", `{"contents": null}`, ErrMalformed, `no string "contents"`},
		{"a list", `[{"contents": "a"}]`, ErrMalformed, "JSON object"},
		{"id a bool", `{"id": true, "contents": "a"}`, ErrMalformed, "neither a string nor an integer"},
		{"invalid UTF-8", "{\"contents\": \"caf\xe9\"}", ErrMalformed, "UTF-8"},
		{"too long", `{"contents": "a"}` + "\n" + long + "\n", ErrMalformed, "corpus line 2 is longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readAll(t, tt.corpus)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
			assert.ErrorContains(t, err, tt.text)
		})
	}

	stop := errors.New("stop")
	err := ReadCorpus(strings.NewReader("{\"contents\": \"a\"}\n{\"contents\": \"b\"}\n"), func(n int, _ Document) error {
		if n == 2 {
			return stop
		}
		return nil
	})
	assert.Equal(t, stop, err)

	broken := errors.New("disk on fire")
	err = ReadCorpus(iotest.ErrReader(broken), func(int, Document) error { return nil })
	assert.ErrorIs(t, err, broken)
}
