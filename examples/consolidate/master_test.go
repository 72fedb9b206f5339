package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	refst "github.com/nlpodyssey/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/internal/bf16ckpt"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

// bf16Bits rounds f to the nearest bfloat16, ties to even, and returns
// its bits: the upper half of f's after adding 0x7fff and the lowest
// kept bit (the weights are finite).
func bf16Bits(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// masterRun is a float32 ZeRO run's checkpoint, from which
// bf16ckpt.Write makes what a job with bf16 weights and sharded master
// weights (DataParallel.ZeROBF16Weights) saves: its weights are the
// master.
type masterRun struct {
	ckpt   string               // the float32 run's checkpoint
	index  policy.ShardIndex    // its optimizer index
	master map[string][]float32 // its weights, by name
}

// newMasterRun trains two in-process ranks at ZeRO-1 and reads their
// checkpoint's weights.
func newMasterRun(t *testing.T, base string) masterRun {
	t.Helper()
	run := trainSFT(t, base, 2, agentrl.ShardOptimizer, nil)
	_, ckpt, err := checkpoint.Root{Dir: run.root}.Latest()
	require.NoError(t, err)
	r := masterRun{ckpt: ckpt, master: map[string][]float32{}}
	b, err := os.ReadFile(filepath.Join(ckpt, policy.ShardStateIndex))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r.index))
	require.False(t, r.index.Master)
	f, err := safetensors.Open(filepath.Join(ckpt, agentrl.CheckpointParamsFile))
	require.NoError(t, err)
	defer f.Close()
	for _, p := range r.index.Params {
		r.master[p.Name], err = f.Float32(p.Name)
		require.NoError(t, err)
	}
	return r
}

// flat is the master weights as one vector, in index order.
func (r masterRun) flat() []float32 {
	var out []float32
	for _, p := range r.index.Params {
		out = append(out, r.master[p.Name]...)
	}
	return out
}

// write makes dst the checkpoint of a job of ranks ranks with bf16
// weights whose float32 master is r's, its partition units of unit
// floats (bf16ckpt.Write): the params file holds the master rounded to
// bf16, and the optimizer state is sharded as policy's format documents
// it, with the master.
func (r masterRun) write(t *testing.T, dst string, ranks, unit int) {
	t.Helper()
	require.NoError(t, bf16ckpt.Write(r.ckpt, dst, ranks, unit, true))
}

// refTensors reads a safetensors file with the reference reader: each
// tensor's dtype and bytes, by name.
func refTensors(t *testing.T, path string) map[string]refst.TensorView {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := refst.Deserialize(b)
	require.NoError(t, err, "the reference reader reads %s", path)
	out := map[string]refst.TensorView{}
	for _, v := range st.Tensors() {
		out[v.Name] = v.TensorView
	}
	return out
}

// TestConsolidateMasterWeights: a checkpoint of a job with bf16
// weights (its params file the bf16 rounding of float32 weights, its
// optimizer shards carrying those float32 weights as the master),
// written at 1, 2 and 3 ranks with units that cut the last one
// unevenly, becomes with -dtype float32 the master weights bit for bit
// (read back through an independent reader), not their bf16 rounding;
// with -dtype bfloat16 the master rounded to nearest even; the same
// folder at every world size, and the one that the float32 run's own
// checkpoint gives. With -state, the params file is the master, and a
// one-process trainer resumes from it as from the float32 checkpoint.
func TestConsolidateMasterWeights(t *testing.T) {
	base := writeBase(t)
	r := newMasterRun(t, base)
	master := r.flat()
	changed := 0
	for _, x := range master {
		if math.Float32frombits(uint32(bf16Bits(x))<<16) != x {
			changed++
		}
	}
	require.Greater(t, changed, len(master)/2, "most weights are not bf16 values: the test tells the master from its rounding")

	// What the float32 run's checkpoint gives, as the program wrote it
	// before master weights: its params file is the master.
	want := map[string]string{}
	for _, dtype := range []string{"float32", "bfloat16"} {
		want[dtype] = filepath.Join(t.TempDir(), "want")
		code, _, stderr := runMain(t, "-checkpoint", r.ckpt, "-base", base, "-out", want[dtype], "-dtype", dtype)
		require.Equal(t, 0, code, stderr)
	}
	wantResume := resumeOne(t, base, r.ckpt)

	for _, job := range []struct{ ranks, unit int }{{1, 1000}, {2, 998}, {3, 999}} {
		t.Run(fmt.Sprintf("%d ranks", job.ranks), func(t *testing.T) {
			ckpt := filepath.Join(t.TempDir(), "step")
			r.write(t, ckpt, job.ranks, job.unit)
			if job.ranks > 1 {
				// The last unit is cut short: the ranks' shards differ
				// in size.
				last := len(master) % job.unit
				require.NotZero(t, last%(job.unit/job.ranks), "the last rank's block of the last unit is partial")
			}
			for _, dtype := range []string{"float32", "bfloat16"} {
				out := filepath.Join(t.TempDir(), "out")
				code, stdout, stderr := runMain(t, "-checkpoint", ckpt, "-base", base, "-out", out, "-dtype", dtype)
				require.Equal(t, 0, code, stderr)
				assert.Contains(t, stdout, "with the float32 master weights")
				sameFolder(t, want[dtype], out)

				rounded, differ := 0, 0
				for name, tv := range refTensors(t, filepath.Join(out, "model.safetensors")) {
					w, ok := r.master[name]
					require.True(t, ok, "unexpected tensor %s", name)
					data := tv.Data()
					if dtype == "float32" {
						require.Equal(t, "F32", tv.DType().String(), name)
						require.Len(t, data, 4*len(w))
						for i, x := range w {
							got := binary.LittleEndian.Uint32(data[4*i:])
							require.Equal(t, math.Float32bits(x), got, "%s[%d]: the master, bit for bit", name, i)
							if got != uint32(bf16Bits(x))<<16 {
								differ++
							}
						}
					} else {
						require.Equal(t, "BF16", tv.DType().String(), name)
						require.Len(t, data, 2*len(w))
						for i, x := range w {
							require.Equal(t, bf16Bits(x), binary.LittleEndian.Uint16(data[2*i:]), "%s[%d]: the master rounded to nearest even", name, i)
						}
						rounded += len(w)
					}
				}
				if dtype == "float32" {
					assert.Equal(t, changed, differ, "the float32 model is not the checkpoint's bf16 weights")
				} else {
					assert.Equal(t, len(master), rounded, "every weight written")
				}
			}

			state := filepath.Join(t.TempDir(), "state")
			code, _, stderr := runMain(t, "-checkpoint", ckpt, "-state", state)
			require.Equal(t, 0, code, stderr)
			info, err := policy.ReadStateInfo(state)
			require.NoError(t, err)
			assert.Equal(t, 0, info.WorldSize)
			assert.False(t, info.Master, "the unsharded state holds the moments only")
			params := refTensors(t, filepath.Join(state, agentrl.CheckpointParamsFile))
			assert.Len(t, params, len(r.master))
			for name, tv := range params {
				w := r.master[name]
				require.Len(t, tv.Data(), 4*len(w), name)
				want, got := make([]uint32, len(w)), make([]uint32, len(w))
				for i, x := range w {
					want[i], got[i] = math.Float32bits(x), binary.LittleEndian.Uint32(tv.Data()[4*i:])
				}
				assert.Equal(t, want, got, "%s: -state's params file holds the master", name)
			}
			assert.Equal(t, wantResume, resumeOne(t, base, state), "one process resumes from the master and the moments, as from the float32 checkpoint")
		})
	}
}

// TestBadMasterWeights: a checkpoint whose optimizer index says the
// shards hold master weights is refused, naming the file, when one
// lacks them or holds them of another size; and one with a LoRA
// adapter too (bf16 weights refuse LoRA). Nothing is written.
func TestBadMasterWeights(t *testing.T) {
	base := writeBase(t)
	r := newMasterRun(t, base)
	good := filepath.Join(t.TempDir(), "good")
	r.write(t, good, 3, 999)
	rewrite := func(rank int, f func(ts []safetensors.Tensor) []safetensors.Tensor) func(string) {
		return func(d string) {
			path := filepath.Join(d, policy.ShardFileName(rank, 3))
			sf, err := safetensors.Open(path)
			require.NoError(t, err)
			var ts []safetensors.Tensor
			for _, info := range sf.Tensors() {
				v, err := sf.Float32(info.Name)
				require.NoError(t, err)
				ts = append(ts, safetensors.Tensor{Name: info.Name, DType: safetensors.F32, Shape: []int{len(v)}, Float32: v})
			}
			meta := sf.Metadata()
			require.NoError(t, sf.Close())
			require.NoError(t, safetensors.WriteFile(path, f(ts), meta))
		}
	}
	without := func(ts []safetensors.Tensor) []safetensors.Tensor {
		var out []safetensors.Tensor
		for _, x := range ts {
			if x.Name != "master" {
				out = append(out, x)
			}
		}
		require.Len(t, out, len(ts)-1)
		return out
	}
	shorter := func(ts []safetensors.Tensor) []safetensors.Tensor {
		for i, x := range ts {
			if x.Name == "master" {
				ts[i].Float32, ts[i].Shape = x.Float32[1:], []int{len(x.Float32) - 1}
			}
		}
		return ts
	}
	for _, tc := range []struct {
		name  string
		spoil func(dir string)
		want  []string
	}{
		{"no master in rank 1's shard", rewrite(1, without), []string{policy.ShardFileName(1, 3), "lacks the master weights"}},
		{"no master in rank 2's shard", rewrite(2, without), []string{policy.ShardFileName(2, 3), "lacks the master weights"}},
		{"a master of another size", rewrite(0, shorter), []string{policy.ShardFileName(0, 3), "master is not F32"}},
		{"a master shard missing", func(d string) { require.NoError(t, os.Remove(filepath.Join(d, policy.ShardFileName(2, 3)))) },
			[]string{"rank 2's shard", policy.ShardFileName(2, 3)}},
		{"a LoRA adapter", func(d string) { require.NoError(t, os.Mkdir(filepath.Join(d, agentrl.CheckpointAdapterDir), 0o755)) },
			[]string{"a LoRA adapter", "master weights"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "step")
			require.NoError(t, os.CopyFS(d, os.DirFS(good)))
			tc.spoil(d)
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := runMain(t, "-checkpoint", d, "-base", base, "-out", out, "-state", out+"-state")
			assert.Equal(t, 1, code)
			assert.Empty(t, stdout)
			for _, w := range tc.want {
				assert.Contains(t, stderr, w)
			}
			assert.NoDirExists(t, out, "nothing written")
			assert.NoDirExists(t, out+"-state")
		})
	}
	// The good one is written.
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runMain(t, "-checkpoint", good, "-base", base, "-out", out, "-state", out+"-state")
	require.Equal(t, 0, code, stderr)
}
