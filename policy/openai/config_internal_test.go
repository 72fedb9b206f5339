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
		BaseURLs: []string{"http://x"}, API: APICompletions, RequestTimeout: 10 * time.Minute, MaxRetries: 4,
		BackoffBase: 200 * time.Millisecond, BackoffMax: 10 * time.Second, Cooldown: 5 * time.Second,
		MaxConcurrency: 256, LogprobsMode: RawLogprobs,
	}, s.cfg)
	assert.Equal(t, 256, cap(s.slots))

	s, err = New(Config{BaseURLs: []string{"http://x"}, MaxRetries: -1})
	require.NoError(t, err)
	assert.Equal(t, 0, s.cfg.MaxRetries)

	// SGLang's default log-probabilities are scaled by the temperature;
	// an explicit mode stays.
	s, err = New(Config{BaseURLs: []string{"http://x:30000"}, API: APISGLangGenerate})
	require.NoError(t, err)
	assert.Equal(t, ScaledLogprobs, s.cfg.LogprobsMode)
	assert.Equal(t, "http://x:30000/generate", s.backends[0].url)
	s, err = New(Config{BaseURLs: []string{"http://x:30000"}, API: APISGLangGenerate, LogprobsMode: RawLogprobs})
	require.NoError(t, err)
	assert.Equal(t, RawLogprobs, s.cfg.LogprobsMode)
}

// TestEndpointURLs: the path each API posts to, from the forms of base
// URL a user writes.
func TestEndpointURLs(t *testing.T) {
	cases := []struct {
		base, completions, generate, models string
	}{
		{"http://h:30000", "http://h:30000/v1/completions", "http://h:30000/generate", "http://h:30000/v1/models"},
		{"http://h:30000/", "http://h:30000/v1/completions", "http://h:30000/generate", "http://h:30000/v1/models"},
		{" http://h:8000/v1/ ", "http://h:8000/v1/completions", "http://h:8000/generate", "http://h:8000/v1/models"},
		{"https://gw/sglang", "https://gw/sglang/v1/completions", "https://gw/sglang/generate", "https://gw/sglang/v1/models"},
		{"http://h/generate", "http://h/generate/v1/completions", "http://h/generate", "http://h/v1/models"},
		{"http://h/v1/completions", "http://h/v1/completions", "http://h/v1/completions/generate", "http://h/v1/models"},
	}
	for _, c := range cases {
		got, err := completionsURL(c.base)
		require.NoError(t, err, c.base)
		assert.Equal(t, c.completions, got, c.base)
		got, err = generateURL(c.base)
		require.NoError(t, err, c.base)
		assert.Equal(t, c.generate, got, c.base)
		got, err = ModelsURL(c.base)
		require.NoError(t, err, c.base)
		assert.Equal(t, c.models, got, c.base)
	}
	for _, bad := range []string{"h:30000", "ftp://h", "http://", "http://h:port"} {
		_, err := generateURL(bad)
		assert.Error(t, err, bad)
		_, err = ModelsURL(bad)
		assert.Error(t, err, bad)
	}
}
