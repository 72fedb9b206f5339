package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/eval"
)

// TestReportExplainsDashes: a metric the table shows as "-" is explained
// under it. Two prompts of one source, all wrong with score −1:
// with -k 2 and no answer extracted from any response (the tiny model's
// case) maj@2 has no majority to take, while best@2 is the best of two
// wrong answers, 0; with -k 1 neither best@1 nor maj@1 exists. A source
// whose responses carry answers gets maj@k, and no note.
func TestReportExplainsDashes(t *testing.T) {
	records := func(k int, pred string) []eval.Record {
		var recs []eval.Record
		for _, id := range []string{"p0", "p1"} {
			for range k {
				recs = append(recs, eval.Record{DataSource: "arith", PromptID: id, Score: -1, Pred: pred, Extra: map[string]float64{toolCallsVar: 0}})
			}
		}
		return recs
	}
	for _, c := range []struct {
		name    string
		k       int
		pred    string
		notes   []string // the lines between the table and the JSON line, in column order
		present []string // metrics of the JSON line
		absent  []string
	}{
		{"no answers", 2, "", []string{"maj@2 -: " + whyNoAnswers}, []string{"best@2", "avg@2"}, []string{"maj@2"}},
		{"one sample", 1, "", []string{"maj@1 -: " + whyFewSamples, "best@1 -: " + whyFewSamples}, []string{"avg@1", "pass@1"}, []string{"maj@1", "best@1"}},
		{"answers", 2, "42", []string{}, []string{"maj@2", "best@2"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := records(c.k, c.pred)
			res, err := eval.Evaluate(context.Background(), recs, eval.Config{})
			require.NoError(t, err)
			var out bytes.Buffer
			require.NoError(t, report(&out, options{k: c.k}, res, recs, nil, 0))
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			require.Len(t, lines, 2+len(c.notes)+1, "header, one source, notes, JSON:\n%s", out.String())
			dashes := 0
			for _, f := range strings.Fields(lines[1]) {
				if f == "-" {
					dashes++
				}
			}
			assert.Equal(t, len(c.notes), dashes, "one - per missing metric: %s", lines[1])
			assert.Equal(t, c.notes, lines[2:2+len(c.notes)]) // both empty without notes
			r := lastJSON(t, out.String())
			for _, m := range c.present {
				assert.Contains(t, r.Sources[0].Metrics, m)
			}
			for _, m := range c.absent {
				assert.NotContains(t, r.Sources[0].Metrics, m)
			}
		})
	}
}
