package serve

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// countingCPU is the CPU backend, with its backend.Decoder, counting the
// calls that bring data to the host.
type countingCPU struct {
	*cpu.Backend
	mu        sync.Mutex
	downloads int
}

func (c *countingCPU) Download(dst []float32, src backend.Buffer, off int) error {
	c.mu.Lock()
	c.downloads++
	c.mu.Unlock()
	return c.Backend.Download(dst, src, off)
}

// Completions go through the model's device decoder (backend.Decoder:
// the paged KV cache and sampling on the backend), as on a GPU: the
// server's model steps through the backend's decoder, and no logits are
// downloaded.
func TestCompletionsUseTheBackendDecoder(t *testing.T) {
	dir := writeCheckpoint(t, 5, 16)
	be := &countingCPU{Backend: cpu.New()}
	m := loadModel(t, dir, policy.WithBackend(be))
	_, ts := startServer(t, dir, Config{Model: m})
	prompts := [][]int{{5, 6, 7}, {9, 8}}
	for _, p := range prompts {
		r := complete(t, ts.URL, map[string]any{"prompt": p, "max_tokens": 4, "temperature": 0.7, "seed": 3})
		require.Len(t, r.Choices, 1)
	}
	st := m.GenerateStats()
	assert.Equal(t, "backend", st.Decoder)
	assert.Positive(t, st.Steps)
	assert.Equal(t, int64(5), st.PromptTokens)
	be.mu.Lock()
	defer be.mu.Unlock()
	assert.Zero(t, be.downloads, "no logits downloaded")
}
