package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOldestWeightVersion: the oldest of the turns' versions; any turn
// without a readable version makes it unknown.
func TestOldestWeightVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		want     int
		ok       bool
	}{
		{"one turn", []string{"7"}, 7, true},
		{"oldest of three", []string{"5", "3", "4"}, 3, true},
		{"version 0", []string{"0", "2"}, 0, true},
		{"unknown turn", []string{"5", ""}, 0, false},
		{"not a number", []string{"v5"}, 0, false},
		{"no turns", nil, 0, false},
	} {
		tr := Trajectory{}
		for _, v := range tc.versions {
			tr.Turns = append(tr.Turns, Turn{WeightVersion: v})
		}
		got, ok := tr.OldestWeightVersion()
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
	}
}
