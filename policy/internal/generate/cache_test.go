package generate

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// specModel is a Model of a given shape that cannot run a step: enough
// to size a KV cache.
type specModel struct {
	sync.Mutex
	spec Spec
}

func (m *specModel) Spec() Spec           { return m.spec }
func (m *specModel) SyncWeights() error   { return nil }
func (m *specModel) Forward(*Batch) error { return errors.New("specModel has no forward") }

// memDecoder is the CPU's Decoder reporting the given memory.
type memDecoder struct {
	backend.Decoder
	info backend.MemoryInfo
}

func (d memDecoder) MemoryInfo() (backend.MemoryInfo, error) { return d.info, nil }

// GPUMemoryUtilization sizes a device cache as vLLM does: u·total minus
// the memory in use, less the model's estimate of a step's memory, in
// whole blocks.
func TestCacheSizing(t *testing.T) {
	// 2 layers of 2 KV heads of 16: a block of 16 rows holds keys and
	// values of 2·16·32 float32 per layer, 2·2·16·32·4 = 8192 bytes.
	const per = 8192
	spec := Spec{Layers: 2, KVHeads: 2, HeadDim: 16, Vocab: 100, MaxPositions: 1 << 24, // no cap from MaxRunning sequences of the whole context
		Step: StepMemory{PerRow: 1000, PerOutput: 10, Fixed: 1 << 20}}
	// The largest step: 2048 prompt rows and 256 decode rows, 256 of
	// them with logits.
	const act = (2048+256)*1000 + 256*10 + 1<<20
	errInput := errors.New("bad input")
	for _, c := range []struct {
		name        string
		info        backend.MemoryInfo
		util        float64
		bytes       int64
		wantBlocks  int64
		wantErrPart string
	}{
		// 0.9·100 GiB − (100 − 60) GiB = 50 GiB, less the step.
		{name: "device", info: backend.MemoryInfo{Free: 60 << 30, Total: 100 << 30}, util: 0.9, wantBlocks: (50<<30 - act) / per},
		{name: "device 0.5", info: backend.MemoryInfo{Free: 60 << 30, Total: 100 << 30}, util: 0.5, wantBlocks: (10<<30 - act) / per},
		// A quarter of 16 GiB available: 4 GiB.
		{name: "host", info: backend.MemoryInfo{Free: 16 << 30, Total: 32 << 30, Host: true}, wantBlocks: (4 << 30) / per},
		{name: "host capped", info: backend.MemoryInfo{Free: 64 << 30, Total: 128 << 30, Host: true}, wantBlocks: (8 << 30) / per},
		{name: "explicit", info: backend.MemoryInfo{Free: 1, Total: 1}, bytes: 10*per + 1, wantBlocks: 10},
		{name: "no room", info: backend.MemoryInfo{Free: 10 << 30, Total: 100 << 30}, util: 0.9, wantErrPart: "no memory for the KV cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := New(&specModel{spec: spec}, memDecoder{Decoder: cpu.New(), info: c.info},
				Config{GPUMemoryUtilization: c.util, KVCacheBytes: c.bytes, ErrInput: errInput})
			got, gotPer, err := e.kvSpec(spec)
			if c.wantErrPart != "" {
				require.ErrorIs(t, err, errInput)
				assert.Contains(t, err.Error(), c.wantErrPart)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, int64(per), gotPer)
			assert.Equal(t, int(c.wantBlocks), got.Blocks)
		})
	}
	// Never more blocks than MaxRunning sequences of the whole context
	// use: 2 · ⌈64/16⌉ = 8.
	spec.MaxPositions = 64
	e := New(&specModel{spec: spec}, cpu.New(), Config{MaxRunning: 2, KVCacheBytes: 1 << 30})
	got, _, err := e.kvSpec(spec)
	require.NoError(t, err)
	assert.Equal(t, 8, got.Blocks)
}
