package reward

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentrl/agentrl/internal/pystr"
)

// This file is the exact-match reward of agentic-search question
// answering, as Search-R1 scores it (verl/utils/reward_score/qa_em.py in
// PeterGriffinJin/Search-R1; verl's search_r1_like_qa_em.py is the same):
// the last <answer>…</answer> of the response, normalized, must equal one
// of the ground truth's targets, normalized.

// NormalizeAnswer is Search-R1's normalize_answer (itself SQuAD's): the
// text lowercased as Python's str.lower() does, every ASCII punctuation
// character (Python's string.punctuation) removed, the words "a", "an"
// and "the" replaced by a space, and runs of white space (str.split())
// collapsed to one space, none at the ends.
//
// A word is a maximal run of the characters Python's re module counts as
// \w in a str pattern (letters, numbers and the underscore), so "the" is
// removed from "the’s" (’ is not ASCII punctuation and not a word
// character) but not from "theatre" or "the_end". Lowercasing follows
// Python's full mapping where it differs from Go's unicode.ToLower: "İ"
// becomes "i̇" (two runes) and a capital sigma at the end of a word
// becomes "ς" (Python's Final_Sigma rule).
func NormalizeAnswer(s string) string {
	s = pyLower(s)
	// Remove ASCII punctuation.
	s = strings.Map(func(r rune) rune {
		if r < 0x80 && strings.ContainsRune(asciiPunctuation, r) {
			return -1
		}
		return r
	}, s)
	// Replace the articles, then collapse white space.
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isWordRune(r) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !isWordRune(r) {
				break
			}
			j += n
		}
		switch w := s[i:j]; w {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(w)
		}
		i = j
	}
	return strings.Join(strings.FieldsFunc(b.String(), pystr.IsSpace), " ")
}

// asciiPunctuation is Python's string.punctuation.
const asciiPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"

// isWordRune reports whether Python's re counts r as \w in a str
// pattern: str.isalnum() (letters and numbers) or the underscore.
func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// pyLower is Python's str.lower(): unicode.ToLower, except that U+0130
// (İ) becomes "i" and U+0307, and a capital sigma in Python's
// Final_Sigma context (after a cased letter, not before one, case-
// ignorable characters skipped) becomes "ς".
func pyLower(s string) string {
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch {
		case r == 0x130:
			b.WriteString("i\u0307")
		case r == 'Σ' && finalSigma(rs, i):
			b.WriteRune('ς')
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports Python's Final_Sigma context of rs[i]: a cased
// character before it and none after it, skipping case-ignorable ones.
func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && caseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !cased(rs[j]) {
		return false
	}
	j = i + 1
	for j < len(rs) && caseIgnorable(rs[j]) {
		j++
	}
	return j == len(rs) || !cased(rs[j])
}

// cased is Unicode's Cased property: upper, lower or title case letters
// and the Other_Lowercase and Other_Uppercase characters.
func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable is Unicode's Case_Ignorable property: categories Mn, Me,
// Cf, Lm and Sk, and the word-break MidLetter, MidNumLet and
// Single_Quote characters.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xb7, 0x387, 0x55f, 0x5f4, 0x2018, 0x2019, 0x2024, 0x2027, 0xfe13, 0xfe52, 0xfe55, 0xff07, 0xff0e, 0xff1a:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// ExactMatch is Search-R1's em_check: whether prediction, normalized,
// equals one of targets, normalized (NormalizeAnswer).
func ExactMatch(prediction string, targets []string) bool {
	p := NormalizeAnswer(prediction)
	for _, t := range targets {
		if NormalizeAnswer(t) == p {
			return true
		}
	}
	return false
}

// QATargets reads a question-answering ground truth: Search-R1's
// {"target": [answers...]} (its data scripts' reward_model.ground_truth,
// which agentrl.PromptsFromExamples passes on as JSON), a target that is
// one string, {"target": "answer"}, or any text that is not a JSON
// object, taken as the one answer. An object without a "target" of
// strings is an error.
func QATargets(groundTruth string) ([]string, error) {
	trimmed := strings.TrimSpace(groundTruth)
	if !strings.HasPrefix(trimmed, "{") {
		return []string{groundTruth}, nil
	}
	var gt struct {
		Target json.RawMessage `json:"target"`
	}
	if err := json.Unmarshal([]byte(trimmed), &gt); err != nil {
		return nil, fmt.Errorf("reward: QA ground truth %q: %w", snippetOf(groundTruth), err)
	}
	if len(gt.Target) == 0 || string(gt.Target) == "null" {
		return nil, fmt.Errorf(`reward: QA ground truth %q: no "target"`, snippetOf(groundTruth))
	}
	var one string
	if err := json.Unmarshal(gt.Target, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(gt.Target, &list); err != nil {
		return nil, fmt.Errorf(`reward: QA ground truth %q: "target" must be a string or a list of strings`, snippetOf(groundTruth))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf(`reward: QA ground truth %q: "target" is empty`, snippetOf(groundTruth))
	}
	return list, nil
}

// snippetOf shortens s for an error message.
func snippetOf(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:80]) + "…"
	}
	return s
}

// ExtractAnswerTag returns the text of the last <answer>…</answer> in
// response, as Python's re.finditer(r"<answer>(.*?)</answer>", text,
// re.DOTALL) finds them (left to right, each from the first <answer>
// left to the first </answer> after it), white space trimmed at both
// ends as str.strip() trims it, and whether there was one. Search-R1's
// extract_solution takes the last of at least two, because its text
// holds the prompt and the prompt's own example answer; a response alone
// needs one.
func ExtractAnswerTag(response string) (string, bool) {
	const open, close = "<answer>", "</answer>"
	var last string
	found := false
	for rest := response; ; {
		i := strings.Index(rest, open)
		if i < 0 {
			break
		}
		body := rest[i+len(open):]
		j := strings.Index(body, close)
		if j < 0 {
			break
		}
		last, found = body[:j], true
		rest = body[j+len(close):]
	}
	return strings.TrimFunc(last, pystr.IsSpace), found
}

// QAConfig configures QAFunc: the score of each verdict.
type QAConfig struct {
	// Correct is the score of an answer that matches a target.
	Correct float64
	// Wrong is the score of an answer that matches none (Search-R1's
	// format_score).
	Wrong float64
	// NoAnswer is the score of a response without <answer>…</answer>.
	NoAnswer float64
}

// SearchR1QA is Search-R1's compute_score_em: 1 for a match, 0 for a
// wrong answer or none.
func SearchR1QA() QAConfig { return QAConfig{Correct: 1} }

// QAFunc scores the last <answer>…</answer> of the response
// (ExtractAnswerTag) by exact match against the targets of the ground
// truth (QATargets, ExactMatch): cfg.Correct when it matches, cfg.Wrong
// when not, cfg.NoAnswer without an answer tag. Output.Pred is the
// normalized answer, so that maj@k votes over normalized answers. A
// ground truth that QATargets cannot read is an error.
func QAFunc(cfg QAConfig) (Func, error) {
	if !(cfg.Correct > cfg.Wrong) || !(cfg.Correct > cfg.NoAnswer) {
		return nil, fmt.Errorf("%w: QAConfig: Correct %g must exceed Wrong %g and NoAnswer %g", ErrConfig, cfg.Correct, cfg.Wrong, cfg.NoAnswer)
	}
	return func(ctx context.Context, in Input) (Output, error) {
		if err := ctx.Err(); err != nil {
			return Output{}, err
		}
		targets, err := QATargets(in.GroundTruth)
		if err != nil {
			return Output{}, err
		}
		ans, ok := ExtractAnswerTag(in.Response)
		if !ok {
			return Output{Score: cfg.NoAnswer, Reason: "no <answer>…</answer> in the response"}, nil
		}
		pred := NormalizeAnswer(ans)
		if ExactMatch(ans, targets) {
			return Output{Score: cfg.Correct, Acc: true, Pred: pred, Reason: "exact match"}, nil
		}
		return Output{Score: cfg.Wrong, Pred: pred, Reason: fmt.Sprintf("%q matches none of %q", pred, targets)}, nil
	}, nil
}
