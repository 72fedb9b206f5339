package setup

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/fleet"
)

// TestFleetVersion: the flag's values, and the fleet.Config each makes
// for a new and a resumed run.
func TestFleetVersion(t *testing.T) {
	for _, c := range []struct {
		value, str  string
		def         bool
		fresh, resd fleet.Config // Version and AdoptVersion
	}{
		{"start", "start", true, fleet.Config{}, fleet.Config{AdoptVersion: true}},
		{"adopt", "adopt", false, fleet.Config{AdoptVersion: true}, fleet.Config{AdoptVersion: true}},
		{"reset", "reset", false, fleet.Config{AdoptVersion: true}, fleet.Config{AdoptVersion: true}},
		{"12", "12", false, fleet.Config{Version: 12}, fleet.Config{Version: 12}},
		{"0", "0", false, fleet.Config{}, fleet.Config{}},
	} {
		var v FleetVersion
		require.NoError(t, v.Set(c.value), c.value)
		assert.Equal(t, c.str, v.String())
		assert.Equal(t, c.def, v.Default(), c.value)
		var fresh, resumed fleet.Config
		v.Configure(&fresh, false)
		v.Configure(&resumed, true)
		assert.Equal(t, c.fresh, fresh, "%s, new run", c.value)
		assert.Equal(t, c.resd, resumed, "%s, resumed run", c.value)
	}
	var zero FleetVersion
	assert.Equal(t, "start", zero.String())
	assert.True(t, zero.Default())
	for _, bad := range []string{"", "-1", "latest", "1.5", "Adopt"} {
		var v FleetVersion
		assert.EqualError(t, v.Set(bad), "want start, adopt, reset or a version number ≥ 0", bad)
	}
}
