package gpu

import (
	"math"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// The decode module's PTX has an entry for every kernel the Go side looks
// up, and the source's extern "C" kernels are exactly those.
func TestDecodePTXHasEveryKernel(t *testing.T) {
	for _, c := range []struct {
		target string
		src    []byte
	}{{"sm_80", decodePTXSM80}, {"sm_90", decodePTXSM90}} {
		info := parsePTX(c.src)
		require.Equal(t, c.target, info.Target)
		require.ElementsMatch(t, decodeKernelNames, info.Entries)
	}
	require.Equal(t, decodePTXSM90, decodePTXFor(9))
	require.Equal(t, decodePTXSM80, decodePTXFor(8))
	src, err := os.ReadFile("kernels/decode.cu")
	require.NoError(t, err)
	var names []string
	for _, m := range regexp.MustCompile(`extern "C" __global__ void (\w+)\(`).FindAllSubmatch(src, -1) {
		names = append(names, string(m[1]))
	}
	require.ElementsMatch(t, decodeKernelNames, names)
	// No kernel name in both modules: the loader keeps one table.
	for _, k := range kernelNames {
		require.NotContains(t, decodeKernelNames, k)
	}
}

func TestPlanPaged(t *testing.T) {
	spec := backend.KVCacheSpec{Layers: 1, KVHeads: 1, HeadDim: 8, BlockSize: 4, Blocks: 16}
	s := backend.PagedStep{Rows: 8, Seqs: []backend.PagedSeq{
		{Q0: 0, QLen: 1, KLen: 6, Blocks: []int32{7, 2, 9}}, // decode: sees 6 keys; the spare entry is not sent
		{Q0: 1, QLen: 6, KLen: 9, Blocks: []int32{3, 4, 5}}, // prefill: tiles of rows 1–4 and 5–6
		{Q0: 7, QLen: 0, KLen: 3, Blocks: []int32{1}},       // nothing new: not sent
	}}
	slots, err := backend.CheckPagedStep(spec, s)
	require.NoError(t, err)
	p := planPaged(spec, s, slots)
	// Slots: position 5 of the first (block 2, row 1) = 9; positions 3–8
	// of the second (block 3 row 3, block 4 rows 0–3, block 5 row 0) =
	// 15, 16, 17, 18, 19, 20; row 7 in no sequence.
	want := []int32{9, 15, 16, 17, 18, 19, 20, -1,
		0, 0, 6, // decode row: query row 0, table at 0, 6 keys
		1, 4, 2, 4, // tile: rows 1–4, table at 2, the first row sees 3+1 keys
		5, 2, 2, 8, // tile: rows 5–6, the first sees 3+4+1
		7, 2, 3, 4, 5} // tables
	require.Equal(t, want, p.ints)
	require.Equal(t, pagedPlan{ints: want, rowsOff: 8, nDecode: 1, tilesOff: 11, nTiles: 2, tabsOff: 19, maxDecode: 6}, p)
}

func TestDecodeSplits(t *testing.T) {
	for _, c := range []struct {
		nd, per, maxK, splits, chunk int
	}{
		// 32 rows × 8 KV heads = 256 blocks: 16 splits would give 4,096
		// warps, but 1,000 keys allow only ⌈1000/64⌉ = 16 — chunk 63.
		{32, 8, 1000, 16, 63},
		{32, 8, 4000, 16, 250},
		// 256 × 8 = 2,048 blocks: 2 splits.
		{256, 8, 1000, 2, 500},
		// Few keys: one split.
		{1, 8, 40, 1, 40},
		// One row, a long context: capped at 64 splits.
		{1, 1, 100000, 64, 1563},
		{0, 8, 0, 1, 1},
	} {
		s, ch := decodeSplits(c.nd, c.per, c.maxK)
		require.Equal(t, []int{c.splits, c.chunk}, []int{s, ch}, "%+v", c)
		require.GreaterOrEqual(t, s*ch, c.maxK)
	}
}

func TestDecodeBucket(t *testing.T) {
	for _, c := range []struct{ maxK, want int }{
		{0, 0}, {1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {4000, 4096},
	} {
		require.Equal(t, c.want, decodeBucket(c.maxK), "%d keys", c.maxK)
	}
	// Batch 32 × 8 KV heads, 1,000 to 1,024 keys: one plan, 16 splits of
	// 64 keys (⌈1024/64⌉ = 16 = 4096/256), the last ones empty for
	// shorter rows.
	for _, k := range []int{1000, 1013, 1024} {
		s, ch := decodeSplits(32, 8, decodeBucket(k))
		require.Equal(t, []int{16, 64}, []int{s, ch}, "%d keys", k)
	}
}

func TestDecodeKernelChoice(t *testing.T) {
	for _, c := range []struct {
		bf16                    bool
		heads, kvheads, hd      int
		name                    string
		maxg, ngrp, hdMax, smem int
	}{
		// Qwen3-0.6B: 16/8 heads of 128, bf16: queries 4·2·128, keys
		// 32·(128+8)·2, values 32·128·2 = 1,024 + 8,704 + 8,192.
		{true, 16, 8, 128, "paged_decode_bf16_g2_h128", 2, 1, 128, 17920},
		// Qwen3-4B: 32/8.
		{true, 32, 8, 128, "paged_decode_bf16_g4_h128", 4, 1, 128, 2048 + 8704 + 8192},
		{false, 6, 1, 40, "paged_decode_f32_g8_h128", 8, 1, 128, 4096 + 32*132*4 + 32*128*4},
		// MQA with 12 query heads: two groups of at most 8.
		{false, 12, 1, 64, "paged_decode_f32_g8_h128", 8, 2, 128, 4096 + 32*132*4 + 32*128*4},
		{true, 2, 2, 256, "paged_decode_bf16_g2_h256", 2, 1, 256, 2048 + 32*264*2 + 32*256*2},
	} {
		name, maxg, ngrp, hdMax, err := decodeKernel(c.bf16, c.heads, c.kvheads, c.hd)
		require.NoError(t, err)
		require.Equal(t, c.name, name)
		require.Equal(t, []int{c.maxg, c.ngrp, c.hdMax}, []int{maxg, ngrp, hdMax})
		require.Equal(t, c.smem, decodeSmem(c.bf16, maxg, hdMax))
		require.Contains(t, decodeKernelNames, name)
	}
	_, _, _, _, err := decodeKernel(true, 4, 2, 512)
	require.ErrorIs(t, err, backend.ErrArg)
	_, _, _, _, err = decodeKernel(true, 5, 2, 64)
	require.ErrorIs(t, err, backend.ErrArg)
	for k, smem := range decodeKernelSmem() {
		require.Contains(t, decodeKernelNames, k)
		require.LessOrEqual(t, smem, 227<<10, "%s fits an H100/H200 block", k)
	}
}

func TestSampleParamsLayout(t *testing.T) {
	require.Equal(t, 32, sampleThreads(40))
	require.Equal(t, 128, sampleThreads(1000))
	require.Equal(t, 1024, sampleThreads(151936))
	rows := []backend.SampleRow{
		{Greedy: true, Seed: 1<<40 | 5, Step: 1<<33 | 7},
		{Temperature: 0.5, TopK: 20, TopP: 0.9, MinP: 0.05, Seed: 3, Step: 4},
	}
	p := packSampleParams(rows)
	f := func(x float32) int32 { return int32(math.Float32bits(x)) }
	require.Equal(t, []int32{
		1, 0, 5, 1 << 8, 7, 2, f(1), f(0), f(0),
		0, 20, 3, 0, 4, 0, f(2), f(0.9), f(0.05),
	}, p)
	raw := []float32{math.Float32frombits(17), -0.5, -1.25, math.Float32frombits(0xffffffff), 0, 0}
	out := make([]backend.SampleResult, 2)
	unpackSampleResults(raw, out)
	require.Equal(t, []backend.SampleResult{{Token: 17, LogProb: -0.5, RawLogProb: -1.25}, {Token: -1}}, out)
}

func TestKVCacheBytes(t *testing.T) {
	// Qwen3-0.6B: 28 layers, 8 KV heads of 128, blocks of 16 rows: a
	// block is 2 · 28 · 16 · 1,024 values = 917,504 of 2 bytes in bf16.
	s := backend.KVCacheSpec{Layers: 28, KVHeads: 8, HeadDim: 128, BlockSize: 16, Blocks: 1}
	require.Equal(t, int64(1835008), kvCacheBytes(s, true))
	require.Equal(t, int64(3670016), kvCacheBytes(s, false))
}

func TestStageSlot(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {1024, 1024}, {1025, 2048}, {70000, 131072},
	} {
		assert.Equal(t, c.want, stageSlot(c.n), "n=%d", c.n)
	}
	// A block table growing from 40 to 200 kilobytes moves the arrays
	// after it twice (at 64 and 128 KiB), not at every 256 bytes.
	moves := 0
	for n := 40 << 10; n < 200<<10; n += 4 {
		if stageSlot(n+4) != stageSlot(n) {
			moves++
		}
	}
	assert.Equal(t, 2, moves)
}
