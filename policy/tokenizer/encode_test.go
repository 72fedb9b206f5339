package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// encodeCase is one line of testdata/encode_cases.jsonl, produced by Hugging
// Face tokenizers (Rust) from the Qwen3 tokenizer.json in qwen3/.
type encodeCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func readEncodeCases(t testing.TB) []encodeCase {
	t.Helper()
	f, err := os.Open("testdata/encode_cases.jsonl")
	require.NoError(t, err)
	defer f.Close()
	var cases []encodeCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var c encodeCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		cases = append(cases, c)
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, cases)
	return cases
}

var qwen3Once = sync.OnceValues(func() (*BPE, error) { return Load("qwen3") })

func qwen3(t testing.TB) *BPE {
	t.Helper()
	tok, err := qwen3Once()
	require.NoError(t, err)
	return tok
}

func TestEncodeMatchesHF(t *testing.T) {
	tok := qwen3(t)
	for i, c := range readEncodeCases(t) {
		got := tok.Encode(c.Text)
		require.Equal(t, c.IDs, got, "case %d %q", i, c.Text)
		require.Equal(t, c.Text, tok.Decode(got), "case %d round trip", i)
	}
}

// TestEncodeEdgeCasesMatchHF checks hand-picked hard inputs (contractions in
// both cases, Unicode white space, CRLF runs, digits of other scripts,
// combining marks that NFC composes, special tokens next to text) against
// testdata/edge_cases.jsonl, made by testdata/hf_encode.js with Hugging Face
// tokenizers 0.22 from testdata/edge_texts.jsonl.
func TestEncodeEdgeCasesMatchHF(t *testing.T) {
	tok := qwen3(t)
	f, err := os.Open("testdata/edge_cases.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	n := 0
	for sc.Scan() {
		var c struct {
			Text    string `json:"text"`
			IDs     []int  `json:"ids"`
			Decoded string `json:"decoded"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		if c.IDs == nil {
			c.IDs = []int{}
		}
		got := tok.Encode(c.Text)
		require.Equal(t, c.IDs, got, "text %q", c.Text)
		require.Equal(t, c.Decoded, tok.Decode(got), "text %q", c.Text)
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 38, n)
}

// TestEncodeLargeInputs feeds inputs that make backtracking regex engines or
// naive merge loops blow up (long white-space runs with and without
// newlines, a long word without spaces, long digit and symbol runs) and
// checks the round trip; the scanner and the heap merge are linear and
// n log n, so this takes milliseconds.
func TestEncodeLargeInputs(t *testing.T) {
	tok := qwen3(t)
	const n = 1 << 17
	inputs := map[string]string{
		"spaces":        strings.Repeat(" ", n) + "x",
		"space-newline": strings.Repeat(" \n", n/2) + "  ",
		"tabs-end":      strings.Repeat("\t", n),
		"one-word":      strings.Repeat("abcdefghij", n/10),
		"cjk":           strings.Repeat("你好世界天地玄黄", n/24),
		"digits":        strings.Repeat("0123456789", n/10),
		"symbols":       strings.Repeat("=-+*", n/4),
		"apostrophes":   strings.Repeat("'", n),
		"specials":      strings.Repeat("<|im_end|><|im_start", n/20),
	}
	for name, s := range inputs {
		ids := tok.Encode(s)
		require.NotEmpty(t, ids, name)
		require.Equal(t, s, tok.Decode(ids), name)
	}
}

func TestEncodeBatchMatchesEncode(t *testing.T) {
	tok := qwen3(t)
	cases := readEncodeCases(t)
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
	}
	got := tok.EncodeBatch(texts)
	require.Len(t, got, len(cases))
	for i, c := range cases {
		require.Equal(t, c.IDs, got[i], "case %d", i)
	}
	require.Empty(t, tok.EncodeBatch(nil))
}

// TestEncodeRandomMatchesHF compares 500 random mixtures of special tokens,
// NFC-composable sequences, scripts, emoji and white space with Hugging
// Face tokenizers (testdata/random_cases.jsonl from testdata/hf_random.js),
// and checks Decode gives back the NFC form of the text.
func TestEncodeRandomMatchesHF(t *testing.T) {
	tok := qwen3(t)
	f, err := os.Open("testdata/random_cases.jsonl")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, changed := 0, 0
	for sc.Scan() {
		var c encodeCase
		require.NoError(t, json.Unmarshal(sc.Bytes(), &c))
		got := tok.Encode(c.Text)
		require.Equal(t, c.IDs, got, "text %q", c.Text)
		dec := tok.Decode(got)
		require.Equal(t, norm.NFC.String(c.Text), norm.NFC.String(dec), "text %q", c.Text)
		if dec != c.Text {
			changed++
		}
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 500, n)
	require.Positive(t, changed, "some texts should be changed by NFC")
}
