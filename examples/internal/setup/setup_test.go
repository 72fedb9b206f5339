package setup

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/tool"
)

// TestLoRAWeights counts adapters by hand: rank × (in + out) per adapted
// projection and layer.
func TestLoRAWeights(t *testing.T) {
	// examples/arith's model until 2026-11-28: hidden 128, 4 heads and 2 KV heads of 32,
	// MLP 384, 2 layers.
	arith := policy.Config{HiddenSize: 128, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32, IntermediateSize: 384, NumHiddenLayers: 2}
	all := []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
	for _, c := range []struct {
		name    string
		mc      policy.Config
		cfg     policy.LoRAConfig
		weights int64
	}{
		// q 128→128, k and v 128→64, o 128→128, gate and up 128→384,
		// down 384→128: (256 + 192 + 192 + 256 + 512 + 512 + 512) · 16 · 2.
		{"arith, all seven, rank 16", arith, policy.LoRAConfig{Rank: 16, TargetModules: all}, 2432 * 16 * 2},
		// PEFT's default for Qwen: q and v, (256 + 192) · 8 · 2.
		{"arith, q and v, rank 8", arith, policy.LoRAConfig{Rank: 8, TargetModules: []string{"q_proj", "v_proj"}}, 448 * 8 * 2},
		// Qwen3-4B (hidden 2560, 32 heads and 8 KV heads of 128, MLP 9728,
		// 36 layers), rank 32 on all seven: the 66M of docs/gpu.md.
		{"Qwen3-4B, all seven, rank 32", policy.Config{HiddenSize: 2560, NumAttentionHeads: 32, NumKeyValueHeads: 8, HeadDim: 128, IntermediateSize: 9728, NumHiddenLayers: 36},
			policy.LoRAConfig{Rank: 32, TargetModules: all}, (2560 + 4096 + 2560 + 1024 + 2560 + 1024 + 4096 + 2560 + 2*(2560+9728) + 9728 + 2560) * 32 * 36},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.weights, LoRAWeights(c.mc, c.cfg))
		})
	}
}

// TestCodeToolsChecksSandboxFusion: a SandboxFusion URL where nothing
// answers fails CodeTools with the check's error, and one that answers
// SandboxFusion's ping gives the tools.
func TestCodeToolsChecksSandboxFusion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ping" {
			_, _ = io.WriteString(w, `"pong"`)
			return
		}
		http.NotFound(w, r)
	}))
	model, harness, closeTools, err := CodeTools(srv.URL, 0, time.Second)
	require.NoError(t, err)
	assert.Equal(t, "code_interpreter", model.Name())
	assert.NotNil(t, harness)
	require.NoError(t, closeTools())
	srv.Close()

	_, _, _, err = CodeTools(srv.URL, 0, time.Second)
	require.ErrorIs(t, err, tool.ErrSandboxFusionCheck)
	assert.ErrorContains(t, err, "-sandbox: ")
	assert.ErrorContains(t, err, srv.URL+" does not answer")
}
