package judge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by the errors of replies that do not parse as
// a verdict.
var ErrMalformed = errors.New("malformed verdict")

// afterThink returns the part of a reply after the model's thinking: the
// text after the last </think>, or the whole reply when it has none. A
// reply that opens <think> and never closes it ran out of tokens while
// thinking and holds no verdict.
func afterThink(reply string) (string, error) {
	if i := strings.LastIndex(reply, "</think>"); i >= 0 {
		return reply[i+len("</think>"):], nil
	}
	if strings.Contains(reply, "<think>") {
		return "", fmt.Errorf("%w: the reply ends inside <think>", ErrMalformed)
	}
	return reply, nil
}

// scoreTag finds <score>…</score>, case-insensitively, with anything but
// a tag inside.
var scoreTag = regexp.MustCompile(`(?i)<score>([^<]*)</score>`)

// ParseScore reads a pointwise verdict: the last <score>N</score> in the
// reply after any <think> block, where N is a number in [0, maxScore],
// written plainly ("7", "7.5") or over the scale ("7/10" with maxScore
// 10). It returns N and the text before the tag (the judge's
// explanation), trimmed. Anything else is an error wrapping ErrMalformed
// that says what was wrong, in words fit to show the judge when asking
// again.
func ParseScore(reply string, maxScore float64) (score float64, explanation string, err error) {
	body, err := afterThink(reply)
	if err != nil {
		return 0, "", err
	}
	tags := scoreTag.FindAllStringSubmatchIndex(body, -1)
	if len(tags) == 0 {
		return 0, "", fmt.Errorf("%w: no <score>N</score> tag", ErrMalformed)
	}
	last := tags[len(tags)-1]
	raw := strings.TrimSpace(body[last[2]:last[3]])
	num, scale, over := strings.Cut(raw, "/")
	if over {
		if d, err := strconv.ParseFloat(strings.TrimSpace(scale), 64); err != nil || d != maxScore {
			return 0, "", fmt.Errorf("%w: <score> holds %q, not a score out of %g", ErrMalformed, clip(raw, 40), maxScore)
		}
	}
	v, perr := strconv.ParseFloat(strings.TrimSpace(num), 64)
	switch {
	case perr != nil:
		return 0, "", fmt.Errorf("%w: <score> holds %q, not a number", ErrMalformed, clip(raw, 40))
	case math.IsNaN(v) || v < 0 || v > maxScore:
		return 0, "", fmt.Errorf("%w: score %s is outside 0 to %g", ErrMalformed, clip(raw, 40), maxScore)
	}
	return v, strings.TrimSpace(body[:last[0]]), nil
}

// RankEntry is the judge's verdict on one response of a group.
type RankEntry struct {
	// ID is the response's number in the prompt, from 1.
	ID int
	// Explanation is the judge's reason for the score.
	Explanation string
	// Score is in [0, 1].
	Score float64
}

// maxJSONStarts bounds the '{' positions ParseRanking tries.
const maxJSONStarts = 64

// ParseRanking reads a group verdict on n responses: a JSON object
//
//	{"scores": [{"id": "1", "explanation": "…", "score": 0.8}, …]}
//
// in the reply after any <think> block, alone or among other text (in a
// ```json fence, after a preamble). An id may be a string or a number; a
// score a number or a string holding one. There must be exactly one
// entry for each id from 1 to n, each score in [0, 1]. The entries are
// returned in id order. Anything else is an error wrapping ErrMalformed
// that says what was wrong.
func ParseRanking(reply string, n int) ([]RankEntry, error) {
	body, err := afterThink(reply)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Scores []struct {
			ID          json.RawMessage `json:"id"`
			Explanation string          `json:"explanation"`
			Score       json.RawMessage `json:"score"`
		} `json:"scores"`
	}
	found := false
	for at, tries := 0, 0; tries < maxJSONStarts; tries++ {
		i := strings.IndexByte(body[at:], '{')
		if i < 0 {
			break
		}
		at += i
		dec := json.NewDecoder(strings.NewReader(body[at:]))
		var probe map[string]json.RawMessage
		if dec.Decode(&probe) == nil && probe["scores"] != nil {
			if err := json.Unmarshal(probe["scores"], &doc.Scores); err != nil {
				return nil, fmt.Errorf("%w: \"scores\" is not a list of {id, explanation, score}: %v", ErrMalformed, err)
			}
			found = true
			break
		}
		at++
	}
	if !found {
		return nil, fmt.Errorf("%w: no JSON object with \"scores\"", ErrMalformed)
	}
	if len(doc.Scores) != n {
		return nil, fmt.Errorf("%w: %d scores for %d responses", ErrMalformed, len(doc.Scores), n)
	}
	out := make([]RankEntry, n)
	seen := make([]bool, n+1)
	for _, e := range doc.Scores {
		id, err := jsonInt(e.ID)
		if err != nil || id < 1 || id > n {
			return nil, fmt.Errorf("%w: id %s is not one of 1 to %d", ErrMalformed, clip(string(e.ID), 20), n)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: id %d is scored twice", ErrMalformed, id)
		}
		seen[id] = true
		s, err := jsonNumber(e.Score)
		if err != nil || math.IsNaN(s) || s < 0 || s > 1 {
			return nil, fmt.Errorf("%w: score %s of id %d is not a number from 0 to 1", ErrMalformed, clip(string(e.Score), 20), id)
		}
		out[id-1] = RankEntry{ID: id, Explanation: e.Explanation, Score: s}
	}
	return out, nil
}

// jsonInt reads a JSON number or a string that holds a whole number.
func jsonInt(raw json.RawMessage) (int, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.Atoi(strings.TrimSpace(s))
	}
	var v int
	err := json.Unmarshal(raw, &v)
	return v, err
}

// jsonNumber reads a JSON number or a string that holds one.
func jsonNumber(raw json.RawMessage) (float64, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.ParseFloat(strings.TrimSpace(s), 64)
	}
	var v float64
	err := json.Unmarshal(raw, &v)
	return v, err
}

// clip shortens s to at most n runes for an error message.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
