package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	refst "github.com/nlpodyssey/safetensors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/safetensors"
)

func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// tinyConfig is a Qwen3 small enough to train in a test, its embedding
// tied.
var tinyConfig = policy.Config{
	ModelType: policy.ModelQwen3, VocabSize: 8, HiddenSize: 16, IntermediateSize: 32,
	NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 8,
	MaxPositionEmbeddings: 32, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	EOSTokenIDs: []int{7},
}

// tokenizerJSON stands for -base's tokenizer: the program copies it as
// it is.
const tokenizerJSON = `{"version": "1.0", "model": {"type": "BPE"}}`

// writeBase writes the model a run starts from, with a tokenizer file.
func writeBase(t *testing.T) string {
	t.Helper()
	base := filepath.Join(t.TempDir(), "base")
	m, err := policy.New(tinyConfig, 3)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Save(base, lm.SaveOptions{}))
	require.NoError(t, os.WriteFile(filepath.Join(base, "tokenizer.json"), []byte(tokenizerJSON), 0o644))
	return base
}

// sftData are the training sequences of trainSFT.
var sftData = []agentrl.SFTSample{
	{IDs: []int{0, 1, 2, 3, 7}, Mask: []float32{0, 1, 1, 1, 1}},
	{IDs: []int{0, 2, 7}, Mask: []float32{0, 1, 1}},
	{IDs: []int{1, 3, 3, 7}, Mask: []float32{0, 0, 1, 1}},
	{IDs: []int{2, 0, 1, 2, 3, 7}, Mask: []float32{0, 1, 0, 1, 1, 1}},
}

// trained is a run of trainSFT: its checkpoint root and the model each
// rank ended with.
type trained struct {
	root   string
	models []*policy.Model
}

// trainSFT fine-tunes base with ranks in-process ranks (goroutines over
// dist.NewGroup) at ZeRO stage zero, and writes the checkpoint of the
// last update under a checkpoint root.
func trainSFT(t *testing.T, base string, ranks, zero int, lora *policy.LoRAConfig) trained {
	t.Helper()
	ctx := context.Background()
	cfg := agentrl.SFTConfig{BatchSize: 4, MicroBatchSize: 1, Epochs: 2, Optimizer: policy.AdamWConfig{LR: 0.05, Eps: 1e-2}, MaxGradNorm: 1, Seed: 3, LoRA: lora}
	comms, err := dist.NewGroup(ctx, ranks, dist.GroupOptions{Timeout: time.Minute})
	require.NoError(t, err)
	run := trained{root: filepath.Join(t.TempDir(), "checkpoints"), models: make([]*policy.Model, ranks)}
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		m, err := policy.Load(base)
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		run.models[r] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comms[r].Close()
			s, err := agentrl.NewSFTTrainer(cfg, agentrl.SFTParts{Policy: m, Data: sftData, DataParallel: agentrl.DataParallel{Comm: comms[r], ZeRO: zero, BucketBytes: 512}})
			if err != nil {
				errs[r] = err
				return
			}
			if err := s.Train(ctx, nil); err != nil {
				errs[r] = err
				return
			}
			_, errs[r] = s.SaveCheckpoint(ctx, checkpoint.Root{Dir: run.root}, 0)
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return run
}

// TestConsolidateZeROCheckpoint: the checkpoint of two in-process ranks
// — their optimizer state sharded at ZeRO-2, or whole with plain data
// parallelism — and of four at ZeRO-1 becomes the folder that the trained model's own Save
// writes, byte for byte, in float32 and bfloat16 and in shards; the
// written safetensors files read back through an independent reader (a
// Go port of Hugging Face's Rust reference, github.com/nlpodyssey/safetensors)
// and through the format's layout checked by hand, with every rank's
// weights; and the training state for one process resumes as the
// sharded checkpoint does.
func TestConsolidateZeROCheckpoint(t *testing.T) {
	base := writeBase(t)
	for _, job := range []struct{ ranks, zero int }{{2, agentrl.ShardGradients}, {2, 0}, {4, agentrl.ShardOptimizer}} {
		run := trainSFT(t, base, job.ranks, job.zero, nil)
		_, ckpt, err := checkpoint.Root{Dir: run.root}.Latest()
		require.NoError(t, err)
		if job.zero > 0 {
			require.FileExists(t, filepath.Join(ckpt, policy.ShardFileName(job.ranks-1, job.ranks)), "the optimizer state is sharded")
		}
		for _, opts := range []lm.SaveOptions{{}, {DType: safetensors.BF16}, {MaxShardBytes: 16 << 10}} {
			want := filepath.Join(t.TempDir(), "want")
			require.NoError(t, run.models[0].Save(want, opts))
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"-checkpoint", run.root, "-base", base, "-out", out}
			if opts.DType == safetensors.BF16 {
				args = append(args, "-dtype", "bfloat16")
			}
			if opts.MaxShardBytes > 0 {
				args = append(args, "-max-shard-size", "16KiB")
			}
			code, stdout, stderr := runMain(t, args...)
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, stdout, "wrote "+out)
			names := sameFolder(t, want, out, "tokenizer.json")
			b, err := os.ReadFile(filepath.Join(out, "tokenizer.json"))
			require.NoError(t, err)
			assert.Equal(t, tokenizerJSON, string(b), "-base's tokenizer copied")
			if opts.MaxShardBytes > 0 {
				assert.Contains(t, names, "model.safetensors.index.json")
			}
			for _, name := range names {
				if filepath.Ext(name) == ".safetensors" {
					for _, m := range run.models {
						checkFile(t, filepath.Join(out, name), m, opts.DType)
					}
				}
			}
			m, err := policy.Load(out)
			require.NoError(t, err, "package policy loads it")
			m.Close()
		}

		// The training state for one process: the optimizer state
		// unsharded, the rest as written; a one-process trainer resumes
		// from it as from the sharded checkpoint.
		state := filepath.Join(t.TempDir(), "state")
		code, _, stderr := runMain(t, "-checkpoint", run.root, "-state", state)
		require.Equal(t, 0, code, stderr)
		assert.NoFileExists(t, filepath.Join(state, policy.ShardStateIndex))
		info, err := policy.ReadStateInfo(state)
		require.NoError(t, err)
		assert.Equal(t, 0, info.WorldSize)
		assert.Equal(t, resumeOne(t, base, ckpt), resumeOne(t, base, state))
	}
}

// TestConsolidateLoRA: a LoRA run's checkpoint, written by two ranks at
// ZeRO-2, becomes -base's model with the adapter merged, byte for byte
// what the trained model's Save writes.
func TestConsolidateLoRA(t *testing.T) {
	base := writeBase(t)
	run := trainSFT(t, base, 2, agentrl.ShardGradients, &policy.LoRAConfig{Rank: 2, Alpha: 4, TargetModules: []string{"all-linear"}})
	want := filepath.Join(t.TempDir(), "want")
	require.NoError(t, run.models[0].Save(want, lm.SaveOptions{}))
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := runMain(t, "-checkpoint", run.root, "-base", base, "-out", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "a LoRA adapter")
	sameFolder(t, want, out, "tokenizer.json")
	b, err := os.ReadFile(filepath.Join(base, "model.safetensors"))
	require.NoError(t, err)
	merged, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
	require.NoError(t, err)
	assert.NotEqual(t, b, merged, "the adapter changed the weights")
}

// resumeOne loads the checkpoint dir into a one-process SFT trainer and
// returns what it saves again: the parameters and the optimizer state.
func resumeOne(t *testing.T, base, dir string) [2][]byte {
	t.Helper()
	m, err := policy.Load(base)
	require.NoError(t, err)
	defer m.Close()
	s, err := agentrl.NewSFTTrainer(agentrl.SFTConfig{BatchSize: 4, Epochs: 2, Optimizer: policy.AdamWConfig{LR: 0.05, Eps: 1e-2}, Seed: 3},
		agentrl.SFTParts{Policy: m, Data: sftData, DataParallel: agentrl.DataParallel{AllowWorldSizeChange: true}})
	require.NoError(t, err)
	require.NoError(t, s.LoadFrom(dir))
	again := t.TempDir()
	require.NoError(t, s.SaveTo(again))
	var out [2][]byte
	for i, name := range []string{agentrl.CheckpointParamsFile, policy.StateFileName} {
		out[i], err = os.ReadFile(filepath.Join(again, name))
		require.NoError(t, err)
	}
	return out
}

// sameFolder asserts that got holds want's files, byte for byte, and
// the extra files named; it returns want's file names.
func sameFolder(t *testing.T, want, got string, extra ...string) []string {
	t.Helper()
	list := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return names
	}
	names := list(want)
	all := append(append([]string(nil), names...), extra...)
	sort.Strings(all)
	require.Equal(t, all, list(got))
	for _, name := range names {
		w, err := os.ReadFile(filepath.Join(want, name))
		require.NoError(t, err)
		g, err := os.ReadFile(filepath.Join(got, name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(w, g), "%s differs from the trained model's Save", name)
	}
	return names
}

// checkFile reads a written safetensors file with the reference reader
// and by hand, as the format's specification lays it out
// (huggingface/safetensors README): an 8-byte little-endian header
// length N, N bytes of JSON mapping each name to dtype, shape and
// data_offsets (begin, end) relative to the data that follows, the
// tensors tiling the data exactly; each tensor must hold m's weight
// of that name, rounded to bfloat16 when dt is BF16.
func checkFile(t *testing.T, path string, m *policy.Model, dt safetensors.DType) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := refst.Deserialize(b)
	require.NoError(t, err, "the reference reader reads %s", path)

	// By hand.
	require.Greater(t, len(b), 8)
	n := binary.LittleEndian.Uint64(b[:8])
	require.LessOrEqual(t, 8+n, uint64(len(b)))
	var header map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &header))
	type entry struct {
		DType   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets [2]int64 `json:"data_offsets"`
	}
	var spans [][2]int64
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var e entry
		require.NoError(t, json.Unmarshal(raw, &e))
		spans = append(spans, e.Offsets)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	end := int64(0)
	for _, s := range spans {
		require.Equal(t, end, s[0], "the tensors tile the data")
		end = s[1]
	}
	require.Equal(t, int64(len(b))-8-int64(n), end, "and end with the file")
	require.Equal(t, len(spans), st.Len())

	want := map[string][]float32{}
	shapes := map[string][]int{}
	for _, sp := range m.Config().TensorSpecs() {
		shapes[sp.Name] = sp.Shape
	}
	for _, p := range m.Params() {
		want[p.Name] = p.Data
	}
	for _, v := range st.Tensors() {
		name := v.Name
		w, ok := want[name]
		require.True(t, ok, "unexpected tensor %s", name)
		tv := v.TensorView
		shape := make([]int, len(tv.Shape()))
		for i, d := range tv.Shape() {
			shape[i] = int(d)
		}
		assert.Equal(t, shapes[name], shape, name)
		data := tv.Data()
		got := make([]float32, len(w))
		switch dt {
		case safetensors.BF16:
			require.Equal(t, "BF16", tv.DType().String())
			require.Len(t, data, 2*len(w))
			for i := range got {
				got[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16)
			}
			for i := range w {
				// Rounded to the nearest bfloat16 (8 significant
				// bits): within half a unit of its last place, at most
				// 2⁻⁸ of the value.
				assert.InDelta(t, w[i], got[i], math.Abs(float64(w[i]))/256, "%s[%d]", name, i)
			}
		default:
			require.Equal(t, "F32", tv.DType().String())
			require.Len(t, data, 4*len(w))
			for i := range got {
				got[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
			assert.Equal(t, w, got, "%s: the trained weights, bit for bit", name)
		}
	}
}

// TestBadCheckpoints: a checkpoint that is not whole, or not the model
// -base describes, is refused with an error that names what is wrong,
// and nothing is written.
func TestBadCheckpoints(t *testing.T) {
	base := writeBase(t)
	run := trainSFT(t, base, 2, agentrl.ShardOptimizer, nil)
	_, ckpt, err := checkpoint.Root{Dir: run.root}.Latest()
	require.NoError(t, err)
	truncate := func(name string) func(string) {
		return func(d string) {
			path := filepath.Join(d, name)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, b[:len(b)-4], 0o644))
		}
	}
	editState := func(f func(map[string]any)) func(string) {
		return func(d string) {
			path := filepath.Join(d, agentrl.CheckpointStateFile)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			var st map[string]any
			require.NoError(t, json.Unmarshal(b, &st))
			f(st)
			b, err = json.Marshal(st)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}
	}
	otherBase := filepath.Join(t.TempDir(), "other")
	{
		cfg := tinyConfig
		cfg.IntermediateSize = 24
		m, err := policy.New(cfg, 1)
		require.NoError(t, err)
		require.NoError(t, m.Save(otherBase, lm.SaveOptions{}))
		m.Close()
	}
	for _, tc := range []struct {
		name  string
		spoil func(dir string)
		base  string
		want  []string
	}{
		{"a shard missing", func(d string) { require.NoError(t, os.Remove(filepath.Join(d, policy.ShardFileName(1, 2)))) }, base,
			[]string{"rank 1's shard", policy.ShardFileName(1, 2), "no such file"}},
		{"mismatched world size", editState(func(st map[string]any) { st["world_size"] = 3 }), base,
			[]string{"mismatched world size", "a job of 3 ranks", "written by 2 ranks"}},
		{"one process's state over shards", editState(func(st map[string]any) { delete(st, "world_size") }), base,
			[]string{"mismatched world size", "one process wrote it"}},
		{"a truncated shard", truncate(policy.ShardFileName(0, 2)), base, []string{policy.ShardFileName(0, 2)}},
		{"a truncated params file", truncate(agentrl.CheckpointParamsFile), base, []string{agentrl.CheckpointParamsFile}},
		{"no trainer state", func(d string) { require.NoError(t, os.Remove(filepath.Join(d, agentrl.CheckpointStateFile))) }, base,
			[]string{"not a trainer checkpoint"}},
		{"another optimizer step", editState(func(st map[string]any) { st["optimizer_steps"] = 7 }), base,
			[]string{"the optimizer state has 2 steps", "says 7"}},
		{"another model", func(string) {}, otherBase,
			[]string{"not the model -base's config.json describes", "model.layers.0.mlp.gate_proj.weight holds 512 floats"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "step")
			require.NoError(t, os.CopyFS(d, os.DirFS(ckpt)))
			tc.spoil(d)
			out := filepath.Join(t.TempDir(), "out")
			code, stdout, stderr := runMain(t, "-checkpoint", d, "-base", tc.base, "-out", out, "-state", out+"-state")
			assert.Equal(t, 1, code)
			assert.Empty(t, stdout)
			for _, w := range tc.want {
				assert.Contains(t, stderr, w)
			}
			assert.NoDirExists(t, out, "nothing written")
			assert.NoDirExists(t, out+"-state")
			entries, err := os.ReadDir(filepath.Dir(out))
			require.NoError(t, err)
			assert.Empty(t, entries, "no leftovers")
		})
	}
}

// TestUsage: bad flags are usage errors (exit status 2) that say what
// is wrong.
func TestUsage(t *testing.T) {
	full := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-base", "b", "-out", "o"}, "-checkpoint is required"},
		{[]string{"-checkpoint", "c"}, "nothing to write"},
		{[]string{"-checkpoint", "c", "-out", "o"}, "-base is required with -out"},
		{[]string{"-checkpoint", "c", "-base", "b", "-out", full}, "not empty (it holds x)"},
		{[]string{"-checkpoint", "c", "-state", full}, "-state " + full + ": not empty"},
		{[]string{"-checkpoint", "c", "-base", "b", "-out", "o", "-dtype", "float16"}, `-dtype "float16"`},
		{[]string{"-checkpoint", "c", "-base", "b", "-out", "o", "-max-shard-size", "5 GB"}, `-max-shard-size: "5 GB"`},
		{[]string{"-checkpoint", "c", "-base", "b", "-out", "o", "-state", "o/"}, "the same folder"},
		{[]string{"-checkpoint", "c", "-state", "s", "extra"}, "unexpected arguments"},
	} {
		code, stdout, stderr := runMain(t, tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
	code, _, stderr := runMain(t, "-checkpoint", filepath.Join(full, "none"), "-state", filepath.Join(t.TempDir(), "s"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no such file")
	code, _, stderr = runMain(t, "-checkpoint", t.TempDir(), "-state", filepath.Join(t.TempDir(), "s"))
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "not a trainer checkpoint")
}

// TestParseSize: sizes as transformers' convert_file_size_to_int reads
// them.
func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"123", 123}, {"5GB", 5_000_000_000}, {"500MiB", 500 << 20}, {"16KiB", 16384}, {"2KB", 2000}, {"7B", 7}, {"1TiB", 1 << 40},
	} {
		got, err := parseSize(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
	for _, in := range []string{"", "GB", "-1", "+5", "5 GB", "5gb", "1.5GB", "9223372036854775807KB", "99999999999999999999"} {
		_, err := parseSize(in)
		assert.Error(t, err, in)
	}
}

// FuzzParseSize: any flag value is read or refused, never a panic, and
// a size read is non-negative and prints back to itself in bytes.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "5GB", "500MiB", "-3", "9223372036854775807", "8EiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		again, err := parseSize(strconv.FormatInt(n, 10))
		require.NoError(t, err)
		require.Equal(t, n, again)
	})
}

// FuzzParseState: any bytes as a checkpoint's trainer state are read
// or refused, never a panic; a state read names a trainer's format and
// a world size of at least one rank.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"format":"agentrl.trainer.v1","step":3,"optimizer_steps":3,"world_size":2}`))
	f.Add([]byte(`{"format":"agentrl.sft.v1","step":1,"optimizer_steps":1}`))
	f.Add([]byte(`{"format":"agentrl.sft.v1","world_size":-2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseState(b)
		if err != nil {
			return
		}
		require.Contains(t, []string{agentrl.TrainerStateFormat, agentrl.SFTStateFormat}, st.Format)
		require.GreaterOrEqual(t, st.WorldSize, 1)
		require.GreaterOrEqual(t, st.Step, 0)
	})
}
