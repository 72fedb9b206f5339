package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// bareBackend hides every interface of a backend but backend.Backend.
type bareBackend struct{ backend.Backend }

// TestBackendInit: New with WithBackendInit draws tensor k of the model
// from stream backend.StreamSeed(seed, k) (values from the definition,
// backend.NormalAt, not from the backend under test), norm weights 1 and
// biases 0; the host copies come back through Params, Save and Clone; a
// model made on the host from those values computes the same log-probs,
// trains the same under DeviceAdamW (the state moved to the backend keeps
// the drawn weights, not the host's zeros), and keeps them under a LoRA
// adapter. A backend without an Initializer is refused.
func TestBackendInit(t *testing.T) {
	ctx := context.Background()
	cfg := loadTiny(t, "llama-tiny").Config() // biases on q/k/v/o and the MLP
	require.True(t, cfg.AttentionBias || cfg.MLPBias, "the test wants biases")
	g := loadGolden(t, "llama-tiny")
	const seed, std = 7, 0.02

	t.Run("values", func(t *testing.T) {
		m, err := New(cfg, seed, WithBackendInit())
		require.NoError(t, err)
		defer m.Close()
		for k, p := range m.Params() {
			for i, v := range p.Data {
				var want float32
				switch {
				case isNorm(p.Name):
					want = 1
				case isBias(p.Name):
					want = 0
				default:
					// RandNormal takes std as a float32.
					want = float32(float64(float32(std)) * backend.NormalAt(backend.StreamSeed(seed, k), uint64(i)))
				}
				require.Equal(t, want, v, "%s[%d]", p.Name, i)
			}
		}
	})

	hostCopy := func(t *testing.T, src *Model) *Model {
		m, err := New(cfg, 0)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		mp := m.Params()
		for i, p := range src.Params() {
			copy(mp[i].Data, p.Data)
		}
		return m
	}
	forward := func(t *testing.T, m *Model) lm.TokenStats {
		st, _, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs}, false)
		require.NoError(t, err)
		return st
	}

	t.Run("computes from the drawn weights", func(t *testing.T) {
		m, err := New(cfg, seed, WithBackendInit())
		require.NoError(t, err)
		defer m.Close()
		before := forward(t, m) // before any host copy exists
		assert.Equal(t, forward(t, hostCopy(t, m)).LogProbs, before.LogProbs)
		c, err := m.Clone()
		require.NoError(t, err)
		defer c.Close()
		assert.Equal(t, before.LogProbs, forward(t, c).LogProbs)
		dir := t.TempDir()
		require.NoError(t, m.Save(dir, lm.SaveOptions{}))
		l, err := Load(dir)
		require.NoError(t, err)
		defer l.Close()
		assert.Equal(t, before.LogProbs, forward(t, l).LogProbs)
	})

	t.Run("DeviceAdamW", func(t *testing.T) {
		w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
		dev, err := New(cfg, seed, WithBackendInit())
		require.NoError(t, err)
		defer dev.Close()
		host := hostCopy(t, dev)
		dopt, err := dev.NewDeviceAdamW(AdamWConfig{LR: 1e-3})
		require.NoError(t, err)
		hopt, err := host.NewDeviceAdamW(AdamWConfig{LR: 1e-3})
		require.NoError(t, err)
		dn := trainSteps(t, dev, dopt, g.seqs, w, u, 2, 0)
		hn := trainSteps(t, host, hopt, g.seqs, w, u, 2, 0)
		assert.Equal(t, hn, dn)
		dp, err := dopt.Params()
		require.NoError(t, err)
		hp, err := hopt.Params()
		require.NoError(t, err)
		for i := range hp {
			assert.Equal(t, hp[i].Data, dp[i].Data, hp[i].Name)
		}
	})

	t.Run("LoRA keeps the base", func(t *testing.T) {
		m, err := New(cfg, seed, WithBackendInit())
		require.NoError(t, err)
		defer m.Close()
		before := forward(t, m)
		require.NoError(t, m.AddLoRA(LoRAConfig{Rank: 2}, 1)) // B = 0: the function is unchanged
		assert.Equal(t, before.LogProbs, forward(t, m).LogProbs)
	})

	t.Run("unsupported backend", func(t *testing.T) {
		_, err := New(cfg, seed, WithBackendInit(), WithBackend(bareBackend{cpu.New()}))
		require.Error(t, err)
		assert.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
	})
}
