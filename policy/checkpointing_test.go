package policy

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// memBackend tracks the floats allocated and not yet freed, and their peak.
type memBackend struct {
	backend.Backend
	mu         sync.Mutex
	live, peak int
	sizes      map[backend.Buffer]int
}

func newMemBackend() *memBackend {
	return &memBackend{Backend: cpu.New(), sizes: map[backend.Buffer]int{}}
}

func (m *memBackend) Alloc(n int) (backend.Buffer, error) {
	b, err := m.Backend.Alloc(n)
	if err == nil {
		m.mu.Lock()
		m.sizes[b] = n
		m.live += n
		m.peak = max(m.peak, m.live)
		m.mu.Unlock()
	}
	return b, err
}

func (m *memBackend) Free(b backend.Buffer) error {
	m.mu.Lock()
	m.live -= m.sizes[b]
	delete(m.sizes, b)
	m.mu.Unlock()
	return m.Backend.Free(b)
}

// resetPeak starts the peak over from the floats alive now.
func (m *memBackend) resetPeak() {
	m.mu.Lock()
	m.peak = m.live
	m.mu.Unlock()
}

// TestActivationCheckpointing: with activation checkpointing the
// log-probs and every gradient are the same bit for bit as without —
// the backward recomputes each layer with the same kernels on the same
// input — for the three tiny models, with a LoRA adapter, and over two
// accumulated passes; a backward follows its own forward's choice when
// the setting changes in between; and the peak of the floats a forward
// and its backward hold beyond the model's own is lower.
func TestActivationCheckpointing(t *testing.T) {
	ctx := context.Background()
	type run struct {
		logp  [][]float32
		grads map[string][]float32
		peak  int
	}
	train := func(t *testing.T, name string, checkpoint, lora bool, flip bool) run {
		be := newMemBackend()
		var opts []ModelOption
		if checkpoint {
			opts = append(opts, WithActivationCheckpointing())
		}
		m := loadTiny(t, name, append(opts, WithBackend(be))...)
		if lora {
			require.NoError(t, m.AddLoRA(LoRAConfig{Rank: 2}, 3))
			for _, p := range m.Params() { // B = 0 would leave the A gradients zero
				for i := range p.Data {
					p.Data[i] += 0.01 * float32(i%7-3)
				}
			}
		}
		g := loadGolden(t, name)
		w, u := unpack(g.seqs, g.tensors["w"]), unpack(g.seqs, g.tensors["u"])
		m.Params() // the gradient buffers and host slices exist before the peak is taken
		var r run
		for pass := range 2 {
			be.resetPeak()
			st, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: g.seqs, Temperature: 0.7}, true)
			require.NoError(t, err)
			if flip {
				m.SetActivationCheckpointing(!checkpoint)
			}
			require.NoError(t, back(ctx, w, u))
			if pass == 0 {
				r.logp, r.peak = st.LogProbs, be.peak-be.live
			}
			if flip {
				m.SetActivationCheckpointing(checkpoint)
			}
		}
		r.grads = map[string][]float32{}
		for _, p := range m.Params() {
			r.grads[p.Name] = p.Grad
		}
		return r
	}
	for _, name := range tinyModels {
		for _, lora := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "", true: "/lora"}[lora], func(t *testing.T) {
				full := train(t, name, false, lora, false)
				ckpt := train(t, name, true, lora, false)
				require.Equal(t, full.logp, ckpt.logp)
				require.Equal(t, len(full.grads), len(ckpt.grads))
				for k, g := range full.grads {
					require.Equal(t, g, ckpt.grads[k], "gradient of %s", k)
				}
				flipped := train(t, name, true, lora, true)
				for k, g := range full.grads {
					require.Equal(t, g, flipped.grads[k], "gradient of %s, the setting flipped mid-pass", k)
				}
				assert.Less(t, ckpt.peak, full.peak, "floats held beyond the model's")
				t.Logf("peak floats beyond the model's: %d without, %d with checkpointing", full.peak, ckpt.peak)
			})
		}
	}
}

// TestCheckpointingMemoryPerLayer: with activation checkpointing a layer
// adds to the peak of a forward and its backward only its saved input,
// T·hidden floats — every other buffer lives one layer at a time — while
// without it a layer adds every activation its backward reads. Measured
// as the difference of the peaks at 2 and 6 layers of a Qwen3-shaped
// model (T = 2 × 12 tokens, hidden 32): 4·T·32 = 3,072 floats with
// checkpointing.
func TestCheckpointingMemoryPerLayer(t *testing.T) {
	ctx := context.Background()
	peak := func(layers int, checkpoint bool) int {
		cfg := Config{ModelType: ModelQwen3, VocabSize: 50, HiddenSize: 32, IntermediateSize: 64, NumHiddenLayers: layers,
			NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16, MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 1e4,
			TieWordEmbeddings: true}
		be := newMemBackend()
		opts := []ModelOption{WithBackend(be)}
		if checkpoint {
			opts = append(opts, WithActivationCheckpointing())
		}
		m, err := New(cfg, 1, opts...)
		require.NoError(t, err)
		defer m.Close()
		seqs := [][]int{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {5, 4, 3, 2, 1, 0, 9, 8, 7, 6, 5, 4}}
		w := [][]float32{make([]float32, 12), make([]float32, 12)}
		w[0][3], w[1][7] = 1, -1
		m.Params()
		for range 2 { // the second pass: gradient buffers exist
			be.resetPeak()
			_, back, err := m.Forward(ctx, lm.TokenBatch{Tokens: seqs}, true)
			require.NoError(t, err)
			require.NoError(t, back(ctx, w, nil))
		}
		return be.peak - be.live
	}
	const T, hidden = 24, 32
	ck := peak(6, true) - peak(2, true)
	full := peak(6, false) - peak(2, false)
	t.Logf("4 more layers add %d floats to the peak with checkpointing, %d without", ck, full)
	assert.Equal(t, 4*T*hidden, ck)
	assert.Greater(t, full, 5*ck, "without checkpointing a layer keeps far more than its input")
}
