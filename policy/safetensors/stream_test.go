package safetensors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fillCalls records the Fill calls of tensors made lazy by lazy.
type fillCalls struct {
	names    []string
	inFlight atomic.Int32
	maxLive  int32
	// buffers are the distinct backing arrays Fill was given.
	buffers map[*float32]bool
}

// lazy returns ts with every Float32 tensor's values given by Fill
// instead, recording the calls in c; fail, when not nil, is asked for
// each call's error.
func lazy(ts []Tensor, c *fillCalls, fail func(name string) error) []Tensor {
	c.buffers = map[*float32]bool{}
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = t
		if t.Float32 == nil && t.Raw != nil {
			continue
		}
		vals := t.Float32
		out[i].Float32 = nil
		out[i].Fill = func(dst []float32) error {
			c.maxLive = max(c.maxLive, c.inFlight.Add(1))
			defer c.inFlight.Add(-1)
			c.names = append(c.names, t.Name)
			if cap(dst) > 0 {
				c.buffers[&dst[:1][0]] = true
			}
			if fail != nil {
				if err := fail(t.Name); err != nil {
					return err
				}
			}
			if len(dst) != len(vals) {
				return fmt.Errorf("dst holds %d, want %d", len(dst), len(vals))
			}
			copy(dst, vals)
			return nil
		}
	}
	return out
}

// dataOrder is the names of ts in the order of their data: element size
// descending, then name.
func dataOrder(ts []Tensor) []string {
	s := append([]Tensor(nil), ts...)
	sort.Slice(s, func(a, b int) bool {
		if s[a].DType.Size() != s[b].DType.Size() {
			return s[a].DType.Size() > s[b].DType.Size()
		}
		return s[a].Name < s[b].Name
	})
	var names []string
	for _, t := range s {
		if t.Raw == nil {
			names = append(names, t.Name)
		}
	}
	return names
}

// TestStreamedCheckpointIsWriteCheckpoint: WriteCheckpoint writes the
// same bytes whether the values are given (Float32) or streamed (Fill),
// and those the writer wrote before streaming existed (the digests were
// computed with it from streamSet), in one file and in shards; a shard
// size below a tensor's gives that tensor a shard alone. Fill is called
// once per tensor, in data order, one at a time, always with one buffer.
func TestStreamedCheckpointIsWriteCheckpoint(t *testing.T) {
	cases := []struct {
		dt       DType
		maxShard int64
		files    int
		want     string
	}{
		{F32, 0, 1, "93e729d686669ff570cc1e17a8bf7ea2f50bbf833a81b5a3138a4c7e0698a1db"},
		{F32, 1 << 30, 1, "93e729d686669ff570cc1e17a8bf7ea2f50bbf833a81b5a3138a4c7e0698a1db"},
		{F32, 300000, 3, "0c0074510bd9bae12960811820b02d7ecd7a9a4c086cacdf1470f6860802a54d"}, // a.big fills one exactly
		{F32, 160000, 3, "0c0074510bd9bae12960811820b02d7ecd7a9a4c086cacdf1470f6860802a54d"}, // a.big exceeds one
		{F32, 5000, 4, "b60b7413d15d415638af0e4ccb6aa83a122a3590b2e78ffa2e8fdbb56a6b3b63"},
		{F32, 2100, 5, "93627802bd011ea87cd0fd42d484ed0e09d22442554210c710b084b673b1db73"},
		{F32, 1, 8, "30a8a7d18c9f2925a0abdf24c4116a823b6ab1add9899eb8deac776de8dddcf3"},
		{BF16, 0, 1, "cbac1f47d630565aa25cca204be850f023836aa8cd2bfea453fc21dcb3f905cc"},
		{BF16, 160000, 1, "cbac1f47d630565aa25cca204be850f023836aa8cd2bfea453fc21dcb3f905cc"},
		{BF16, 5000, 3, "930445829ec0a5fee6479518136277e255b0073f7816cddcff67beda4883cb39"},
		{BF16, 2100, 4, "7b9f1b19eecc4b5e6d39c294c8fdaa28ff62385bba620094fdf5c6e3a8cfb6e8"},
		{BF16, 1, 8, "5e673f91b3e9f3c0a50a79f576bc1bf93309dec78a4cf1c7bd5e3a485a7d38f9"},
		{"mixed", 0, 1, "a54536b0efc228ae916a253c6b2e5e2bf2c9ee4719f8c4b12940569d427689c4"},
		{"mixed", 160000, 2, "45e7986e9b148500c82249bac097e4760fd736b49bd348d7f7366e476bdeeffb"},
		{"mixed", 5000, 4, "81dd269b4bfd33a45b36c4013934190dc9a086fb75b7be6e9fcdc04b40d437c5"},
		{"mixed", 2100, 5, "282f6c1213bab3ec1a21feca6c3fd3226ae87d12ba6cd570037303e4632dd3eb"},
		{"mixed", 1, 9, "2a30d5884afeebc7c21798bee1168f4e16ec2ad0f5766e9b94e8168c186efb01"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.dt, c.maxShard), func(t *testing.T) {
			ts := streamSet(c.dt)
			given, streamed := t.TempDir(), t.TempDir()
			require.NoError(t, WriteCheckpoint(given, ts, map[string]string{"k": "v"}, c.maxShard))
			var calls fillCalls
			require.NoError(t, WriteCheckpoint(streamed, lazy(ts, &calls, nil), map[string]string{"k": "v"}, c.maxShard))
			assert.Equal(t, c.want, dirDigest(t, given), "given")
			assert.Equal(t, c.want, dirDigest(t, streamed), "streamed")
			entries, err := os.ReadDir(streamed)
			require.NoError(t, err)
			files := len(entries)
			if files > 1 {
				files-- // the index
			}
			assert.Equal(t, c.files, files)
			assert.Equal(t, dataOrder(ts), calls.names)
			assert.Equal(t, int32(1), calls.maxLive)
			assert.Len(t, calls.buffers, 1, "one buffer for every tensor")

			// Write and WriteFile stream the same way.
			var calls2 fillCalls
			path := filepath.Join(t.TempDir(), "x.safetensors")
			require.NoError(t, WriteFile(path, lazy(ts, &calls2, nil), nil))
			require.NoError(t, WriteFile(filepath.Join(streamed, "y.safetensors"), ts, nil))
			a, err := os.ReadFile(path)
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(streamed, "y.safetensors"))
			require.NoError(t, err)
			assert.Equal(t, b, a)
		})
	}
}

// TestFillErrors: a tensor set that is invalid fails before any Fill;
// a Fill that fails stops the write with its error wrapped, naming the
// tensor, and leaves the folder as it was — a new one empty, one with an
// earlier checkpoint unchanged, with no temporary file — wherever it
// fails: in the first file, or in a later shard after others were
// complete.
func TestFillErrors(t *testing.T) {
	boom := errors.New("boom")
	t.Run("invalid", func(t *testing.T) {
		for _, c := range []struct {
			name string
			ts   []Tensor
			want string
		}{
			{"fill and float32", []Tensor{{Name: "a", DType: F32, Shape: []int{1}, Float32: []float32{1}, Fill: func([]float32) error { return nil }}}, "sets Fill and Float32 or Raw"},
			{"fill to int", []Tensor{{Name: "a", DType: I32, Shape: []int{1}, Fill: func([]float32) error { return nil }}}, "convert only to F32, BF16 or F16"},
			{"duplicate after fill", append(lazy(streamSet(F32), &fillCalls{}, nil), Tensor{Name: "model.b.mid", DType: F32, Shape: []int{1}, Float32: []float32{1}}), "duplicate"},
		} {
			t.Run(c.name, func(t *testing.T) {
				var calls fillCalls
				ts := c.ts
				for i := range ts {
					if f := ts[i].Fill; f != nil {
						ts[i].Fill = func(dst []float32) error { calls.names = append(calls.names, ts[i].Name); return f(dst) }
					}
				}
				dir := t.TempDir()
				assert.ErrorContains(t, WriteCheckpoint(dir, ts, nil, 100), c.want)
				assert.ErrorContains(t, WriteFile(filepath.Join(dir, "x"), ts, nil), c.want)
				assert.Empty(t, calls.names, "no Fill before the layout is known")
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				assert.Empty(t, entries)
			})
		}
	})
	ts := streamSet(BF16)
	order := dataOrder(ts)
	for _, c := range []struct {
		name     string
		maxShard int64
		failAt   int // index in data order of the Fill that fails
		earlier  bool
	}{
		{"single, first tensor", 0, 0, false},
		{"single, last tensor", 0, len(order) - 1, true},
		{"sharded, first shard", 5000, 0, true},
		{"sharded, a later shard", 2100, len(order) - 2, false},
		{"sharded over an earlier save, last shard", 1, len(order) - 1, true},
		{"single over an earlier sharded save", 0, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.earlier {
				// An earlier save of other values with the same file names.
				old := streamSet(BF16)
				for i := range old {
					for j := range old[i].Float32 {
						old[i].Float32[j] += 1
					}
				}
				shard := c.maxShard
				if c.name == "single over an earlier sharded save" {
					shard = 2100
				}
				require.NoError(t, WriteCheckpoint(dir, old, nil, shard))
			}
			before := dirDigest(t, dir)
			var calls fillCalls
			err := WriteCheckpoint(dir, lazy(ts, &calls, func(name string) error {
				if name == order[c.failAt] {
					return boom
				}
				return nil
			}), nil, c.maxShard)
			require.ErrorIs(t, err, boom)
			assert.ErrorContains(t, err, fmt.Sprintf("tensor %q", order[c.failAt]))
			assert.Equal(t, order[:c.failAt+1], calls.names, "stopped at the failure")
			assert.Equal(t, before, dirDigest(t, dir), "the folder as it was, no temporary file")
		})
	}
	t.Run("Write", func(t *testing.T) {
		var calls fillCalls
		err := Write(discard{}, lazy(ts, &calls, func(string) error { return boom }), nil)
		require.ErrorIs(t, err, boom)
		assert.ErrorContains(t, err, fmt.Sprintf("safetensors: tensor %q: boom", order[0]))
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestFillMemory measures what WriteCheckpoint allocates to write a
// model given by Fill whose size is far above its largest tensor's:
// 64 tensors of 64 Ki floats, 16 MiB in float32. Streaming allocates one
// tensor's values (256 KiB), the write buffer (1 MiB) and the encoder's
// chunk (chunkBytes, 256 KiB), plus headers, the index and the file
// operations, which stay under 512 KiB here: under 2 MiB in all, where
// holding the model would take 16 MiB. TotalAlloc counts every byte
// allocated, freed or not, so the bound holds whatever the collector
// does.
func TestFillMemory(t *testing.T) {
	const tensors, elems = 64, 64 << 10
	modelBytes := uint64(tensors * elems * 4)
	const bound = 256<<10 + 1<<20 + chunkBytes + 512<<10
	require.Less(t, uint64(bound), modelBytes/2)
	for _, c := range []struct {
		dt       DType
		maxShard int64
	}{{F32, 0}, {BF16, 0}, {F32, 1 << 20}, {BF16, 1 << 20}} {
		t.Run(fmt.Sprintf("%s/%d", c.dt, c.maxShard), func(t *testing.T) {
			ts := make([]Tensor, tensors)
			for i := range ts {
				ts[i] = Tensor{Name: fmt.Sprintf("model.layers.%d.weight", i), DType: c.dt, Shape: []int{256, elems / 256},
					Fill: func(dst []float32) error {
						for j := range dst {
							dst[j] = float32(i) + float32(j%4)/4 // exact in BF16
						}
						return nil
					}}
			}
			dir := t.TempDir()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			require.NoError(t, WriteCheckpoint(dir, ts, nil, c.maxShard))
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s, max shard %d: allocated %.2f MiB to write %.0f MiB of float32 weights", c.dt, c.maxShard, float64(alloc)/(1<<20), float64(modelBytes)/(1<<20))
			assert.Less(t, alloc, uint64(bound))

			ck, err := OpenCheckpoint(dir)
			require.NoError(t, err)
			defer ck.Close()
			got, err := ck.Float32("model.layers.63.weight")
			require.NoError(t, err)
			assert.Equal(t, float32(63.75), got[1003])
		})
	}
}
