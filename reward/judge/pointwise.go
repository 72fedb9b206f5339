package judge

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/agentrl/agentrl/reward"
)

// PointwiseConfig configures a reward that has the judge grade each
// response on its own against a rubric (and a reference, when there is
// one).
type PointwiseConfig struct {
	// Rubric says what a good response is; required. It goes into the
	// system message, which is the same for every request (a server's
	// prefix cache reuses it).
	Rubric string
	// MaxScore is the top of the judge's scale, from 0; zero means 10.
	// The reward's score is the verdict divided by MaxScore, in [0, 1].
	MaxScore float64
	// Reference returns the reference answer shown to the judge; nil
	// means Input.GroundTruth, and an empty one is left out.
	Reference func(reward.Input) string
	// Reasks is how many times the judge is asked again after a reply
	// that does not parse; zero means 2, negative means none.
	Reasks int
	// Fallback is the score of a response whose judgement reached no
	// verdict (every reply malformed, or the requests kept failing); it
	// is counted in Stats.Fallbacks and said in the Reason.
	Fallback float64
	// PassScore is the score (in [0, 1]) from which Output.Acc is set;
	// zero means 1, full marks.
	PassScore float64
}

const defaultReasks = 2

func reasks(n int) int {
	switch {
	case n == 0:
		return defaultReasks
	case n < 0:
		return 0
	}
	return n
}

func passScore(p float64) (float64, error) {
	if math.IsNaN(p) || p < 0 || p > 1 {
		return 0, fmt.Errorf("%w: PassScore %g is not in [0, 1]", ErrConfig, p)
	}
	if p == 0 {
		return 1, nil
	}
	return p, nil
}

// Pointwise returns a reward that asks the judge to grade each response
// by c.Rubric on a scale from 0 to c.MaxScore, and scores it
// verdict/MaxScore. The judge sees the task (Input.Prompt), the
// reference and the response, and is asked to end its reply with
// <score>N</score> (read by ParseScore). A reply that does not parse is
// shown back to the judge with what was wrong, up to c.Reasks times;
// after that, or when the requests keep failing, the response scores
// c.Fallback. The reward returns an error only when its context ends.
func (j *Judge) Pointwise(c PointwiseConfig) (reward.Func, error) {
	if strings.TrimSpace(c.Rubric) == "" {
		return nil, fmt.Errorf("%w: PointwiseConfig.Rubric is required", ErrConfig)
	}
	if c.MaxScore == 0 {
		c.MaxScore = 10
	}
	if math.IsNaN(c.MaxScore) || math.IsInf(c.MaxScore, 0) || c.MaxScore < 0 {
		return nil, fmt.Errorf("%w: MaxScore %g", ErrConfig, c.MaxScore)
	}
	if math.IsNaN(c.Fallback) || math.IsInf(c.Fallback, 0) {
		return nil, fmt.Errorf("%w: Fallback %g", ErrConfig, c.Fallback)
	}
	pass, err := passScore(c.PassScore)
	if err != nil {
		return nil, err
	}
	ref := c.Reference
	if ref == nil {
		ref = func(in reward.Input) string { return in.GroundTruth }
	}
	system := pointwiseSystem(c.Rubric, c.MaxScore)
	n := reasks(c.Reasks)
	parse := func(reply string) (verdict, error) {
		v, note, err := ParseScore(reply, c.MaxScore)
		return verdict{scores: []float64{v}, notes: []string{note}}, err
	}
	correct := func(err error) string {
		return fmt.Sprintf("Your reply could not be read (%v). Reply again, and end it with the grade as <score>N</score>, N a number from 0 to %g.", err, c.MaxScore)
	}
	return func(ctx context.Context, in reward.Input) (reward.Output, error) {
		q := question{
			msgs:  []Message{{Role: "system", Content: system}, {Role: "user", Content: pointwiseUser(in.Prompt, ref(in), in.Response)}},
			parse: parse, reasks: n, correct: correct,
		}
		v, err := j.ask(ctx, q)
		if err != nil {
			var nv *noVerdict
			if !errors.As(err, &nv) {
				return reward.Output{}, err
			}
			j.count(func(s *Stats) { s.Fallbacks++ })
			return reward.Output{Score: c.Fallback, Reason: fmt.Sprintf("judge: no verdict (%v); fallback score %g", err, c.Fallback)}, nil
		}
		score := v.scores[0] / c.MaxScore
		return reward.Output{
			Score:  score,
			Acc:    score >= pass,
			Reason: fmt.Sprintf("judge: %g/%g: %s", v.scores[0], c.MaxScore, clip(v.notes[0], 200)),
		}, nil
	}, nil
}

// pointwiseSystem is the system message of a pointwise judgement.
func pointwiseSystem(rubric string, maxScore float64) string {
	return fmt.Sprintf(`You grade one response to a task. The user message holds the task, a reference answer when there is one, and the response. Grade the response by the rubric below; when a reference is given, take it as correct.

Rubric:
%s

Explain your grade in a few sentences, then give it on the last line in exactly this form:
<score>N</score>
where N is a number from 0 (worst) to %g (best).`, strings.TrimSpace(rubric), maxScore)
}

// pointwiseUser is the user message of a pointwise judgement.
func pointwiseUser(task, ref, response string) string {
	var b strings.Builder
	section(&b, "task", task)
	section(&b, "reference", ref)
	b.WriteString("<response>\n" + response + "\n</response>")
	return b.String()
}

// section writes <name>text</name> and a blank line, or nothing when text
// is empty.
func section(b *strings.Builder, name, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	fmt.Fprintf(b, "<%s>\n%s\n</%s>\n\n", name, text, name)
}
