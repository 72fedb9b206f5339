package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// streamConfig is a model of 15 MiB in float32 whose largest tensor
// (an MLP projection, 64 Ki floats) is 256 KiB: 60 times smaller.
func streamConfig(t testing.TB) Config {
	cfg, err := ReadConfig(filepath.Join("testdata", "model", "qwen3-tiny"))
	require.NoError(t, err)
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 512, 128, 512, 16
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 4, 2, 32
	return cfg
}

// patternValue is element i of tensor k of the models and states these
// tests write: a fixed integer hash, exact in BF16.
func patternValue(k, i int) float32 {
	x := uint32(i)*2654435761 + uint32(k)*40503
	return float32(int32(x)>>23) / 64
}

// masterValue is the master weight at flat index i of the states these
// tests write, with bits below bf16's precision.
func masterValue(i int) float32 { return patternValue(2, i) + float32(i%251+1)/(1<<20) }

// patternRead is a WriteModel read of patternValue, without allocating;
// it counts the calls under way and the buffers it is given.
type patternRead struct {
	index    map[string]int
	inFlight int
	maxLive  int
	buffers  map[*float32]bool
	failAt   string
}

func newPatternRead(cfg Config) *patternRead {
	r := &patternRead{index: map[string]int{}, buffers: map[*float32]bool{}}
	for k, sp := range cfg.TensorSpecs() {
		r.index[sp.Name] = k
	}
	return r
}

var errPattern = errors.New("the source failed")

func (r *patternRead) read(name string, dst []float32) error {
	r.inFlight++
	defer func() { r.inFlight-- }()
	r.maxLive = max(r.maxLive, r.inFlight)
	if cap(dst) > 0 {
		r.buffers[&dst[:1][0]] = true
	}
	if name == r.failAt {
		return errPattern
	}
	k := r.index[name]
	for i := range dst {
		dst[i] = patternValue(k, i)
	}
	return nil
}

// writeModelInMemory is WriteModel as it was before streaming: every
// tensor read into memory, then written.
func writeModelInMemory(t *testing.T, dir string, cfg Config, read func(string, []float32) error, opts lm.SaveOptions) {
	cfg, err := saveDType(cfg, opts)
	require.NoError(t, err)
	dt := opts.DType
	if dt == "" {
		dt = safetensors.F32
	}
	var ts []safetensors.Tensor
	for _, sp := range cfg.TensorSpecs() {
		data := make([]float32, sp.Size())
		require.NoError(t, read(sp.Name, data))
		ts = append(ts, safetensors.Tensor{Name: sp.Name, DType: dt, Shape: sp.Shape, Float32: data})
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, WriteConfig(dir, cfg))
	require.NoError(t, safetensors.WriteCheckpoint(dir, ts, nil, opts.MaxShardBytes))
}

// readDir maps the names of dir's files to their contents.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	files := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		files[e.Name()] = b
	}
	return files
}

// TestWriteModelStreams: WriteModel writes the folder that reading every
// tensor first and writing them after wrote, byte for byte, in F32 and
// BF16, in one file and in shards (1 MiB, and 100 KiB, below the largest
// tensor), calling read for one tensor at a time into one buffer. What it
// allocates is measured: one tensor's buffer (256 KiB), the safetensors
// writer's buffers (1.25 MiB), and the specs, headers, index, config and
// folder listings, under 1 MiB: below 2.5 MiB, where the model is 15 MiB
// in float32.
// TotalAlloc counts every byte allocated, freed or not. (With 100 KiB
// shards, 68 files, the folder listing that atomicfile makes for each
// file adds garbage that grows with the number of files, so the bound is
// checked where there are few.)
func TestWriteModelStreams(t *testing.T) {
	cfg := streamConfig(t)
	modelBytes := uint64(4 * cfg.NumParams())
	const bound = 256<<10 + 1<<20 + 256<<10 + 1<<20
	require.Less(t, uint64(bound), modelBytes/4)
	for _, c := range []struct {
		opts  lm.SaveOptions
		files int
	}{
		{lm.SaveOptions{}, 2},
		{lm.SaveOptions{DType: safetensors.BF16}, 2},
		{lm.SaveOptions{MaxShardBytes: 1 << 20}, 19},
		{lm.SaveOptions{DType: safetensors.BF16, MaxShardBytes: 100 << 10}, 68},
	} {
		opts := c.opts
		t.Run(fmt.Sprintf("%s/%d", opts.DType, opts.MaxShardBytes), func(t *testing.T) {
			want := t.TempDir()
			writeModelInMemory(t, want, cfg, newPatternRead(cfg).read, opts)
			got := filepath.Join(t.TempDir(), "new", "folder")
			r := newPatternRead(cfg)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			require.NoError(t, WriteModel(got, cfg, r.read, opts))
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %.2f MiB to write a model of %.1f MiB in float32", float64(alloc)/(1<<20), float64(modelBytes)/(1<<20))
			if c.files < 20 {
				assert.Less(t, alloc, uint64(bound))
			}
			assert.Equal(t, 1, r.maxLive)
			assert.Len(t, r.buffers, 1)
			assert.Len(t, r.index, len(cfg.TensorSpecs()))
			wantFiles, gotFiles := readDir(t, want), readDir(t, got)
			require.Equal(t, len(wantFiles), len(gotFiles))
			assert.Equal(t, c.files, len(gotFiles), "config.json, the weights, the index")
			for name, b := range wantFiles {
				assert.True(t, bytes.Equal(b, gotFiles[name]), name)
			}
		})
	}
}

// TestWriteModelReadFails: a read that fails mid-way is WriteModel's
// error, wrapped, naming the tensor; a folder WriteModel made is gone,
// and one that held a model holds it unchanged.
func TestWriteModelReadFails(t *testing.T) {
	cfg := streamConfig(t)
	specs := cfg.TensorSpecs()
	for _, c := range []struct {
		name     string
		earlier  bool
		maxShard int64
	}{
		{"new folder, one file", false, 0},
		{"new folder, shards", false, 1 << 20},
		{"earlier model, one file", true, 0},
		{"earlier model, shards", true, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "a", "b")
			opts := lm.SaveOptions{MaxShardBytes: c.maxShard}
			var before map[string][]byte
			if c.earlier {
				require.NoError(t, WriteModel(dir, cfg, newPatternRead(streamConfig(t)).read, opts))
				before = readDir(t, dir)
			}
			r := newPatternRead(cfg)
			r.failAt = specs[len(specs)/2].Name
			err := WriteModel(dir, cfg, r.read, opts)
			require.ErrorIs(t, err, errPattern)
			assert.ErrorContains(t, err, strconv.Quote(r.failAt))
			if c.earlier {
				assert.Equal(t, before, readDir(t, dir))
			} else {
				entries, err := os.ReadDir(root)
				require.NoError(t, err)
				assert.Empty(t, entries, "the folders WriteModel made are removed")
			}
		})
	}
}

// shardedStateFixture writes into dir a sharded optimizer state of
// parameters of the given sizes, as ranks ranks of a unit would have
// saved it, with the moments patternValue(0, i) and patternValue(1, i)
// at flat index i.
func shardedStateFixture(tb testing.TB, dir string, sizes []int, ranks, unit int) {
	shardedStateFixtureMaster(tb, dir, sizes, ranks, unit, false)
}

// shardedStateFixtureMaster is shardedStateFixture, with master weights
// (ShardOptions.BF16Weights) masterValue(i) at flat index i when master
// is set.
func shardedStateFixtureMaster(tb testing.TB, dir string, sizes []int, ranks, unit int, master bool) {
	lay := newShardLayout(sizes, ranks, 0, unit)
	idx := ShardIndex{Format: ShardStateIndexFormat, WorldSize: ranks, Unit: lay.unit, Step: 7,
		Hyperparameters: AdamWConfig{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}.hyperparameters(), Master: master}
	for i, n := range sizes {
		idx.Params = append(idx.Params, ShardParam{Name: fmt.Sprintf("p%03d.weight", i), Size: n})
	}
	for r := range ranks {
		var m, v, w []float32
		for k := range lay.units {
			lo, hi := lay.own(r, k)
			for i := lo; i < hi; i++ {
				m, v, w = append(m, patternValue(0, i)), append(v, patternValue(1, i)), append(w, masterValue(i))
			}
		}
		meta := map[string]string{"format": ShardStateFormat, "step": "7", "rank": strconv.Itoa(r), "world_size": strconv.Itoa(ranks),
			"unit": strconv.Itoa(lay.unit), "elements": strconv.Itoa(lay.total)}
		for k, v := range idx.Hyperparameters {
			meta[k] = v
		}
		ts := []safetensors.Tensor{
			{Name: "exp_avg", DType: safetensors.F32, Shape: []int{len(m)}, Float32: m},
			{Name: "exp_avg_sq", DType: safetensors.F32, Shape: []int{len(v)}, Float32: v},
		}
		if master {
			ts = append(ts, safetensors.Tensor{Name: "master", DType: safetensors.F32, Shape: []int{len(w)}, Float32: w})
		}
		name := ShardFileName(r, ranks)
		require.NoError(tb, safetensors.WriteFile(filepath.Join(dir, name), ts, meta))
		idx.Files = append(idx.Files, name)
	}
	b, err := json.MarshalIndent(idx, "", "  ")
	require.NoError(tb, err)
	require.NoError(tb, os.WriteFile(filepath.Join(dir, ShardStateIndex), b, 0o644))
}

// consolidateInMemory is ConsolidateState of a sharded state as it was
// before streaming: every moment read into memory, then written.
func consolidateInMemory(t *testing.T, dir string) []byte {
	idx, err := readShardIndex(dir)
	require.NoError(t, err)
	src, err := openShards(dir, idx)
	require.NoError(t, err)
	defer src.close()
	var ts []safetensors.Tensor
	off := 0
	for _, p := range idx.Params {
		m, v := make([]float32, p.Size), make([]float32, p.Size)
		require.NoError(t, src.read(off, off+p.Size, m, v))
		off += p.Size
		ts = append(ts,
			safetensors.Tensor{Name: "exp_avg." + p.Name, DType: safetensors.F32, Shape: []int{p.Size}, Float32: m},
			safetensors.Tensor{Name: "exp_avg_sq." + p.Name, DType: safetensors.F32, Shape: []int{p.Size}, Float32: v})
	}
	meta := map[string]string{"format": StateFormat, "step": strconv.FormatInt(idx.Step, 10)}
	for k, v := range idx.Hyperparameters {
		meta[k] = v
	}
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, ts, meta))
	return buf.Bytes()
}

// countingWriter counts what is written to it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// TestConsolidateStateStreams: ConsolidateState writes the bytes that
// reading every moment first wrote, for states of 1 to 3 ranks and units
// that cut parameters anywhere, with the moments in their places; and it
// streams: to consolidate 32 MiB of moments whose largest parameter is
// 1 MiB it allocates that parameter's buffer, the safetensors writer's
// (1.25 MiB), a read buffer (256 KiB), and under 512 KiB of headers and
// file handling: below 3 MiB. TotalAlloc counts every byte allocated.
func TestConsolidateStateStreams(t *testing.T) {
	for _, c := range []struct {
		sizes       []int
		ranks, unit int
	}{
		{[]int{10, 0, 33, 7}, 1, 1 << 20},
		{[]int{10, 0, 33, 7}, 2, 8},
		{[]int{100, 3, 250, 1, 64}, 3, 33},
		{[]int{1000, 2000, 500}, 2, 1 << 20},
	} {
		t.Run(fmt.Sprintf("%v/%d/%d", c.sizes, c.ranks, c.unit), func(t *testing.T) {
			dir := t.TempDir()
			shardedStateFixture(t, dir, c.sizes, c.ranks, c.unit)
			var got bytes.Buffer
			require.NoError(t, ConsolidateState(dir, &got))
			assert.Equal(t, consolidateInMemory(t, dir), got.Bytes())
			st := readState(t, got.Bytes())
			off := 0
			for i, n := range c.sizes {
				m, v := st.tensors[fmt.Sprintf("exp_avg.p%03d.weight", i)], st.tensors[fmt.Sprintf("exp_avg_sq.p%03d.weight", i)]
				require.Len(t, m, n)
				for j := range n {
					require.Equal(t, patternValue(0, off+j), m[j])
					require.Equal(t, patternValue(1, off+j), v[j])
				}
				off += n
			}
		})
	}
	t.Run("memory", func(t *testing.T) {
		const params, size = 16, 256 << 10 // 1 MiB each, 2 moments
		sizes := make([]int, params)
		for i := range sizes {
			sizes[i] = size
		}
		dir := t.TempDir()
		shardedStateFixture(t, dir, sizes, 2, 1<<16) // 64 units; the default is 6.5 Mi floats
		stateBytes := uint64(2 * 4 * params * size)
		const bound = 4*size + 1<<20 + 256<<10 + 256<<10 + 512<<10
		require.Less(t, uint64(bound), stateBytes/8)
		var w countingWriter
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		require.NoError(t, ConsolidateState(dir, &w))
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("allocated %.2f MiB to consolidate %.0f MiB of moments", float64(alloc)/(1<<20), float64(stateBytes)/(1<<20))
		assert.Less(t, alloc, uint64(bound))
		assert.Greater(t, uint64(w.n), stateBytes)
	})
}
