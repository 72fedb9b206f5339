package judge

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseScore(t *testing.T) {
	cases := []struct {
		reply string
		max   float64
		score float64
		note  string
		err   string // part of the error; "" for none
	}{
		{reply: "<score>7</score>", max: 10, score: 7},
		{reply: "Correct and complete.\n<score> 10 </score>\n", max: 10, score: 10, note: "Correct and complete."},
		{reply: "<SCORE>2.5</Score>", max: 5, score: 2.5},
		{reply: "<score>7/10</score>", max: 10, score: 7},
		{reply: "<score>7 / 10</score>", max: 10, score: 7},
		{reply: "<score>0</score>", max: 10, score: 0},
		{reply: "First I thought <score>3</score>, but on reflection <score>8</score>", max: 10, score: 8, note: "First I thought <score>3</score>, but on reflection"},
		{reply: "<think>Is it <score>1</score>?</think>\nGood. <score>9</score>", max: 10, score: 9, note: "Good."},
		{reply: "<think>Let me see. The response says", max: 10, err: "ends inside <think>"},
		{reply: "Score: 9/10", max: 10, err: "no <score>N</score> tag"},
		{reply: "<score></score>", max: 10, err: `holds "", not a number`},
		{reply: "<score>nine</score>", max: 10, err: `holds "nine", not a number`},
		{reply: "<score>7/5</score>", max: 10, err: "not a score out of 10"},
		{reply: "<score>11</score>", max: 10, err: "outside 0 to 10"},
		{reply: "<score>-1</score>", max: 10, err: "outside 0 to 10"},
		{reply: "<score>NaN</score>", max: 10, err: "outside 0 to 10"},
		{reply: "<score>Inf</score>", max: 10, err: "outside 0 to 10"},
		{reply: "<score>7<b></score>", max: 10, err: "no <score>N</score> tag"},
		{reply: "", max: 10, err: "no <score>N</score> tag"},
	}
	for _, c := range cases {
		score, note, err := ParseScore(c.reply, c.max)
		if c.err != "" {
			require.ErrorIs(t, err, ErrMalformed, c.reply)
			assert.ErrorContains(t, err, c.err, c.reply)
			continue
		}
		require.NoError(t, err, c.reply)
		assert.Equal(t, c.score, score, c.reply)
		assert.Equal(t, c.note, note, c.reply)
	}
}

func TestParseRanking(t *testing.T) {
	ok := []struct {
		name, reply string
		scores      []float64
	}{
		{"plain", `{"scores": [{"id": "1", "explanation": "a", "score": 0.2}, {"id": "2", "explanation": "b", "score": 1}]}`, []float64{0.2, 1}},
		{"out of order, numeric ids, string score", `{"scores": [{"id": 2, "explanation": "b", "score": "0.75"}, {"id": " 1 ", "score": 0}]}`, []float64{0, 0.75}},
		{"fenced, after a preamble with braces", "Compared {1} and {2}:\n```json\n" + `{"scores": [{"id": "1", "score": 0.5}, {"id": "2", "score": 0.5}]}` + "\n```\nDone.", []float64{0.5, 0.5}},
		{"after thinking", `<think>{"scores": []}</think>{"scores": [{"id": "1", "score": 0.1}, {"id": "2", "score": 0.9}]}`, []float64{0.1, 0.9}},
		{"extra fields", `{"reasoning": "x", "scores": [{"trajectory_id": "x", "id": "1", "score": 1}, {"id": "2", "score": 0}]}`, []float64{1, 0}},
	}
	for _, c := range ok {
		entries, err := ParseRanking(c.reply, 2)
		require.NoError(t, err, c.name)
		require.Len(t, entries, 2, c.name)
		for i, e := range entries {
			assert.Equal(t, i+1, e.ID, c.name)
			assert.Equal(t, c.scores[i], e.Score, c.name)
		}
	}
	bad := []struct{ name, reply, err string }{
		{"no JSON", "Response 1 is better.", `no JSON object with "scores"`},
		{"no scores key", `{"ranking": [1, 2]}`, `no JSON object with "scores"`},
		{"scores not a list", `{"scores": {"1": 0.5}}`, "not a list"},
		{"too few", `{"scores": [{"id": "1", "score": 0.5}]}`, "1 scores for 2 responses"},
		{"too many", `{"scores": [{"id": "1", "score": 0.5}, {"id": "2", "score": 0.5}, {"id": "3", "score": 0.5}]}`, "3 scores for 2 responses"},
		{"duplicate id", `{"scores": [{"id": "1", "score": 0.5}, {"id": "1", "score": 0.4}]}`, "id 1 is scored twice"},
		{"id out of range", `{"scores": [{"id": "1", "score": 0.5}, {"id": "3", "score": 0.4}]}`, `id "3" is not one of 1 to 2`},
		{"id not a number", `{"scores": [{"id": "1", "score": 0.5}, {"id": "two", "score": 0.4}]}`, `id "two"`},
		{"score above 1", `{"scores": [{"id": "1", "score": 0.5}, {"id": "2", "score": 7}]}`, "score 7 of id 2"},
		{"score missing", `{"scores": [{"id": "1", "score": 0.5}, {"id": "2"}]}`, "of id 2 is not a number"},
		{"score a word", `{"scores": [{"id": "1", "score": 0.5}, {"id": "2", "score": "high"}]}`, `score "high"`},
		{"truncated", `{"scores": [{"id": "1", "score": 0.5}, {"id": "2", "sc`, `no JSON object with "scores"`},
		{"unclosed think", `<think>{"scores": [{"id": "1", "score": 0.5}, {"id": "2", "score": 0.5}]}`, "ends inside <think>"},
	}
	for _, c := range bad {
		_, err := ParseRanking(c.reply, 2)
		require.ErrorIs(t, err, ErrMalformed, c.name)
		assert.ErrorContains(t, err, c.err, c.name)
	}
}

// FuzzParseScore: any reply either parses to a finite score on the scale
// or is an ErrMalformed; a tag written around a score on the scale reads
// back as that score.
func FuzzParseScore(f *testing.F) {
	for _, s := range []string{"<score>7</score>", "x <score>3/10</score> <score>", "<think>a</think><score>1e1</score>", "<score>0x1p3</score>", "<score>\u00a05</score>"} {
		f.Add(s, 4.0)
	}
	f.Fuzz(func(t *testing.T, reply string, v float64) {
		score, _, err := ParseScore(reply, 10)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
		} else {
			require.False(t, math.IsNaN(score))
			require.GreaterOrEqual(t, score, 0.0)
			require.LessOrEqual(t, score, 10.0)
		}
		if math.IsNaN(v) || v < 0 || v > 10 || strings.Contains(reply, "<think>") || strings.Contains(reply, "</think>") {
			return
		}
		got, _, err := ParseScore(fmt.Sprintf("%s\n<score>%v</score>", reply, v), 10)
		require.NoError(t, err)
		require.Equal(t, v, got)
	})
}

// FuzzParseRanking: any reply either parses to n entries with ids 1..n in
// order and scores in [0, 1], or is an ErrMalformed.
func FuzzParseRanking(f *testing.F) {
	for _, s := range []string{
		`{"scores": [{"id": "1", "explanation": "a", "score": 0.2}, {"id": "2", "explanation": "b", "score": 1}]}`,
		"```json\n{\"scores\": [{\"id\": 2, \"score\": \"0.5\"}, {\"id\": 1, \"score\": 0}]}\n```",
		`{{{"scores": [`, `<think>x</think>{"scores": null}`,
	} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, reply string, n int) {
		if n < 1 || n > 64 {
			return
		}
		entries, err := ParseRanking(reply, n)
		if err != nil {
			require.ErrorIs(t, err, ErrMalformed)
			return
		}
		require.Len(t, entries, n)
		for i, e := range entries {
			require.Equal(t, i+1, e.ID)
			require.False(t, math.IsNaN(e.Score))
			require.GreaterOrEqual(t, e.Score, 0.0)
			require.LessOrEqual(t, e.Score, 1.0)
		}
	})
}
