package openai

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigZero: every zero field but BaseURLs takes the default its
// comment names; a negative MaxRetries means none.
func TestConfigZero(t *testing.T) {
	s, err := New(Config{BaseURLs: []string{"http://x"}})
	require.NoError(t, err)
	assert.NotNil(t, s.client)
	assert.Equal(t, Config{
		BaseURLs: []string{"http://x"}, RequestTimeout: 10 * time.Minute, MaxRetries: 4,
		BackoffBase: 200 * time.Millisecond, BackoffMax: 10 * time.Second, Cooldown: 5 * time.Second,
		MaxConcurrency: 256, LogprobsMode: RawLogprobs,
	}, s.cfg)
	assert.Equal(t, 256, cap(s.slots))

	s, err = New(Config{BaseURLs: []string{"http://x"}, MaxRetries: -1})
	require.NoError(t, err)
	assert.Equal(t, 0, s.cfg.MaxRetries)
}
