package lm

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckSampleParamsTopLogprobs: top log-probabilities need Logprobs
// and a count that is not negative.
func TestCheckSampleParamsTopLogprobs(t *testing.T) {
	for _, c := range []struct {
		name string
		p    SampleParams
		ok   bool
	}{
		{"none", SampleParams{}, true},
		{"with logprobs", SampleParams{Logprobs: true, TopLogprobs: 5}, true},
		{"without logprobs", SampleParams{TopLogprobs: 5}, false},
		{"negative", SampleParams{Logprobs: true, TopLogprobs: -1}, false},
	} {
		err := CheckSampleParams(c.p)
		if c.ok {
			assert.NoError(t, err, c.name)
		} else {
			assert.ErrorIs(t, err, ErrSampling, c.name)
		}
	}
}
