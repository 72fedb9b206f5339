package reward

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// mathCase is one line of testdata/math_cases.jsonl (see gen_math_cases.py):
// a response, a gold answer and the verdict, labelled by hand with a note.
type mathCase struct {
	ID       int    `json:"id"`
	Category string `json:"category"`
	Response string `json:"response"`
	Gold     string `json:"gold"`
	Expected bool   `json:"expected"`
	Note     string `json:"note"`
}

func loadMathCases(tb testing.TB) []mathCase {
	tb.Helper()
	f, err := os.Open("testdata/math_cases.jsonl")
	require.NoError(tb, err)
	defer f.Close()
	var cases []mathCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c mathCase
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &c), "line %d", len(cases)+1)
		cases = append(cases, c)
	}
	require.NoError(tb, sc.Err())
	require.GreaterOrEqual(tb, len(cases), 150)
	return cases
}

// TestMathCorpus checks every labelled case of the corpus.
func TestMathCorpus(t *testing.T) {
	for _, c := range loadMathCases(t) {
		out := MathVerify(context.Background(), c.Response, c.Gold)
		if out.Acc != c.Expected {
			t.Errorf("case %d (%s, %s): got %v, want %v\n  response: %q\n  gold: %q\n  reason: %s",
				c.ID, c.Category, c.Note, out.Acc, c.Expected, c.Response, c.Gold, out.Reason)
		}
	}
}
