package judge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentrl/agentrl/reward"
)

// DefaultRankingRubric is the grading standard of a Ranking whose
// RankingConfig.Rubric is empty. It asks for what GRPO needs of relative
// scores (the points of ART's RULER default rubric, in words of our own):
// success far above failure, directness above detours, score gaps in
// proportion to quality gaps, partial credit for progress.
const DefaultRankingRubric = `- A response that accomplishes the task scores far above one that does not.
- Of two responses that accomplish it, the more direct one (no wasted steps, no needless detours) scores higher.
- Score gaps follow quality gaps: responses of about equal quality get about equal scores, a much better response a much higher score.
- A response that makes real progress without finishing earns partial credit.`

// RankingConfig configures a reward that has the judge score the
// responses of a group together, relative to each other.
type RankingConfig struct {
	// Rubric is the grading standard; empty means DefaultRankingRubric.
	Rubric string
	// Reference returns the reference answer shown to the judge, from the
	// group's first member; nil means Input.GroundTruth, and an empty one
	// is left out.
	Reference func(reward.Input) string
	// Reasks is how many times the judge is asked again after a reply
	// that does not parse; zero means 2, negative means none.
	Reasks int
	// Fallback is the score of every member of a group whose judgement
	// reached no verdict; the same score for all gives the group zero
	// advantage under GRPO, so it teaches nothing rather than something
	// wrong. Each member is counted in Stats.Fallbacks.
	Fallback float64
	// PassScore is the score from which Output.Acc is set; zero means 1.
	PassScore float64
	// JSONSchema sends the verdict's JSON schema as the chat request's
	// response_format, for endpoints that constrain decoding to it
	// (vLLM, SGLang, OpenAI's structured outputs). It needs the chat API
	// (no Config.Render).
	JSONSchema bool
}

// Ranking returns a group reward that shows the judge all responses of a
// group at once (identical responses once) and asks for a score from 0
// to 1 for each, relative to the others, as ART's RULER does; each
// response's reward is its score. The reply is a JSON object read by
// ParseRanking. A reply that does not parse is shown back to the judge
// with what was wrong, up to c.Reasks times; after that, or when the
// requests keep failing, every member scores c.Fallback. The members
// must share one task (Input.Prompt); the reward returns an error when
// they do not, or when its context ends.
func (j *Judge) Ranking(c RankingConfig) (reward.GroupFunc, error) {
	if strings.TrimSpace(c.Rubric) == "" {
		c.Rubric = DefaultRankingRubric
	}
	if math.IsNaN(c.Fallback) || math.IsInf(c.Fallback, 0) {
		return nil, fmt.Errorf("%w: Fallback %g", ErrConfig, c.Fallback)
	}
	if c.JSONSchema && j.cfg.Render != nil {
		return nil, fmt.Errorf("%w: RankingConfig.JSONSchema needs the chat API, and Config.Render makes the judge a completions client", ErrConfig)
	}
	pass, err := passScore(c.PassScore)
	if err != nil {
		return nil, err
	}
	ref := c.Reference
	if ref == nil {
		ref = func(in reward.Input) string { return in.GroundTruth }
	}
	var format *shared.ResponseFormatJSONSchemaParam
	if c.JSONSchema {
		format = rankingFormat()
	}
	system := rankingSystem(c.Rubric)
	n := reasks(c.Reasks)
	return func(ctx context.Context, group []reward.Input) ([]reward.Output, error) {
		if len(group) == 0 {
			return nil, nil
		}
		for i, in := range group[1:] {
			if in.Prompt != group[0].Prompt {
				return nil, fmt.Errorf("judge: ranking: member %d has another prompt than member 0", i+1)
			}
		}
		// Each distinct response is shown once; slot[i] is member i's.
		var unique []string
		slot := make([]int, len(group))
		at := map[string]int{}
		for i, in := range group {
			k, ok := at[in.Response]
			if !ok {
				k = len(unique)
				at[in.Response] = k
				unique = append(unique, in.Response)
			}
			slot[i] = k
		}
		q := question{
			msgs:  []Message{{Role: "system", Content: system}, {Role: "user", Content: rankingUser(group[0].Prompt, ref(group[0]), unique)}},
			parse: rankingParser(len(unique)), reasks: n, correct: rankingCorrection(len(unique)), format: format,
		}
		v, err := j.ask(ctx, q)
		outs := make([]reward.Output, len(group))
		if err != nil {
			var nv *noVerdict
			if !errors.As(err, &nv) {
				return nil, err
			}
			j.count(func(s *Stats) { s.Fallbacks += int64(len(group)) })
			for i := range outs {
				outs[i] = reward.Output{Score: c.Fallback, Reason: fmt.Sprintf("judge: no verdict on the group (%v); fallback score %g", err, c.Fallback)}
			}
			return outs, nil
		}
		for i, k := range slot {
			s := v.scores[k]
			outs[i] = reward.Output{
				Score:  s,
				Acc:    s >= pass,
				Reason: fmt.Sprintf("judge: %g as response %d of %d: %s", s, k+1, len(unique), clip(v.notes[k], 200)),
			}
		}
		return outs, nil
	}, nil
}

// rankingParser reads a verdict on n responses.
func rankingParser(n int) func(string) (verdict, error) {
	return func(reply string) (verdict, error) {
		entries, err := ParseRanking(reply, n)
		if err != nil {
			return verdict{}, err
		}
		v := verdict{scores: make([]float64, n), notes: make([]string, n)}
		for i, e := range entries {
			v.scores[i], v.notes[i] = e.Score, e.Explanation
		}
		return v, nil
	}
}

// rankingCorrection is the message that asks again after a malformed
// group verdict.
func rankingCorrection(n int) func(error) string {
	return func(err error) string {
		return fmt.Sprintf(`Your reply could not be read (%v). Reply again with only the JSON object {"scores": [...]}, one entry for each id from 1 to %d, each score a number from 0 to 1.`, err, n)
	}
}

// rankingSystem is the system message of a group judgement.
func rankingSystem(rubric string) string {
	return `You compare responses that were all written for the same task. The user message holds the task, a reference answer when there is one, and the responses, each with an id. Give each response a score from 0 to 1 by the standards below. The scores are read relative to each other, so a clearly better response must get a clearly higher score.

Standards:
` + strings.TrimSpace(rubric) + `

Reply with one JSON object and nothing else, in this form:
{"scores": [{"id": "1", "explanation": "<one or two sentences>", "score": <a number from 0 to 1>}, ...]}
with exactly one entry for each response id.`
}

// rankingUser is the user message of a group judgement.
func rankingUser(task, ref string, responses []string) string {
	var b strings.Builder
	section(&b, "task", task)
	section(&b, "reference", ref)
	for i, r := range responses {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "<response id=\"%d\">\n%s\n</response>", i+1, r)
	}
	return b.String()
}

// rankingFormat is the response_format that constrains a reply to the
// verdict's shape.
func rankingFormat() *shared.ResponseFormatJSONSchemaParam {
	entry := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"id":          map[string]any{"type": "string"},
			"explanation": map[string]any{"type": "string"},
			"score":       map[string]any{"type": "number"},
		},
		"required":             []string{"id", "explanation", "score"},
		"additionalProperties": false,
	}
	return &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
		Name:   "group_scores",
		Strict: openai.Bool(true),
		Schema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"scores": map[string]any{"type": "array", "items": entry}},
			"required":             []string{"scores"},
			"additionalProperties": false,
		},
	}}
}
