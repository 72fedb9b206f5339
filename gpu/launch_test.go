package gpu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

func TestGrid1D(t *testing.T) {
	require.Equal(t, uint32(0), grid1D(0, 256))
	require.Equal(t, uint32(1), grid1D(1, 256))
	require.Equal(t, uint32(1), grid1D(256, 256))
	require.Equal(t, uint32(2), grid1D(257, 256))
	// Huge n: capped, the grid-stride loop covers the rest.
	require.Equal(t, uint32(maxGrid1D), grid1D(1<<40, 256))
}

func TestAttnTiles(t *testing.T) {
	// Span A: 6 queries on their own 6 keys (training); rows 0–3 then 4–5.
	// Query i sees i+1 keys, so tile 1 starts at 1 key and tile 2 at 5.
	// Span B: 2 queries at rows 6–7 after 10 cached keys at key row 20
	// (KLen 12): they see 11 and 12 keys. An empty span adds nothing.
	spans := []backend.Span{{Q0: 0, QLen: 6, K0: 0, KLen: 6}, {Q0: 6, QLen: 2, K0: 20, KLen: 12}, {Q0: 8, QLen: 0, K0: 0, KLen: 3}}
	require.Equal(t, []int32{
		0, 4, 0, 1,
		4, 2, 0, 5,
		6, 2, 20, 11,
	}, attnTiles(spans, attRows))
	// The tensor-core kernels' 64-row tiles: 70 queries are rows 0–63 and
	// 64–69; the second tile's first row sees 65 keys.
	require.Equal(t, []int32{
		0, 64, 0, 1,
		64, 6, 0, 65,
		70, 2, 80, 11,
	}, attnTiles([]backend.Span{{Q0: 0, QLen: 70, K0: 0, KLen: 70}, {Q0: 70, QLen: 2, K0: 80, KLen: 12}}, tcRows))
}

func TestAttnKeyTiles(t *testing.T) {
	// Span B of TestAttnTiles: 12 keys from row 20, 2 queries from row 6,
	// past = 10. Keys in tiles of 4: {20,4,0}, {24,4,4}, {28,4,8}. The
	// span without queries contributes no gradient and no tile.
	spans := []backend.Span{{Q0: 6, QLen: 2, K0: 20, KLen: 12}, {Q0: 8, QLen: 0, K0: 0, KLen: 3}, {Q0: 9, QLen: 1, K0: 40, KLen: 1}}
	require.Equal(t, []int32{
		20, 4, 0, 6, 2, 10,
		24, 4, 4, 6, 2, 10,
		28, 4, 8, 6, 2, 10,
		40, 1, 0, 9, 1, 0,
	}, attnKeyTiles(spans, attRows))
	require.Equal(t, []int32{
		20, 12, 0, 6, 2, 10,
		40, 1, 0, 9, 1, 0,
	}, attnKeyTiles(spans, tcRows))
}

func TestDecodePlan(t *testing.T) {
	// Two decode spans: one new token after 5 cached (sees 6 keys), three
	// new tokens after 6 cached (see 7, 8, 9). 9 ≤ 256 keys: one split.
	spans := []backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 6}, {Q0: 1, QLen: 3, K0: 16, KLen: 9}}
	rows, splits, chunk, ok := decodePlan(spans)
	require.True(t, ok)
	require.Equal(t, []int32{0, 0, 6, 1, 16, 7, 2, 16, 8, 3, 16, 9}, rows)
	require.Equal(t, 1, splits)
	require.Equal(t, 9, chunk)

	// 1000 visible keys: ⌈1000/256⌉ = 4 splits of ⌈1000/4⌉ = 250.
	_, splits, chunk, ok = decodePlan([]backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 1000}})
	require.True(t, ok)
	require.Equal(t, 4, splits)
	require.Equal(t, 250, chunk)
	// Very long caches: splits capped at 64, chunks grow: ⌈100000/64⌉ = 1563.
	_, splits, chunk, _ = decodePlan([]backend.Span{{Q0: 0, QLen: 1, K0: 0, KLen: 100000}})
	require.Equal(t, decodeMaxSp, splits)
	require.Equal(t, 1563, chunk)
	require.GreaterOrEqual(t, splits*chunk, 100000, "splits must cover every key")

	for name, sp := range map[string][]backend.Span{
		"prefill (no cache)": {{Q0: 0, QLen: 1, K0: 0, KLen: 1}},
		"too many queries":   {{Q0: 0, QLen: 5, K0: 0, KLen: 9}},
		"mixed":              {{Q0: 0, QLen: 1, K0: 0, KLen: 9}, {Q0: 1, QLen: 3, K0: 9, KLen: 3}},
		"no queries":         {{Q0: 0, QLen: 0, K0: 0, KLen: 9}},
	} {
		_, _, _, ok := decodePlan(sp)
		require.False(t, ok, name)
	}
}

func TestAttnSharedMemoryFitsDevices(t *testing.T) {
	// Forward and decode stay under the default 48 KiB at every head dim;
	// backward at head dim 256 needs the opt-in, which is 99 KiB on sm_86,
	// 163 KiB on sm_80 and 227 KiB on sm_90.
	for _, hd := range []int{2, 64, 128, 256} {
		require.LessOrEqual(t, attnFwdSmem(hd), 48<<10, "forward, hd %d", hd)
		require.LessOrEqual(t, attnDecodeSmem(hd), 48<<10, "decode, hd %d", hd)
		require.LessOrEqual(t, attnBwdSmem(hd), 99<<10, "backward, hd %d", hd)
	}
	// hd 128: (4·128 + 32·129) floats = 4640 floats = 18560 bytes.
	require.Equal(t, 18560, attnFwdSmem(128))
}

func TestTensorCoreKernels(t *testing.T) {
	for hd, want := range map[int]int{1: 64, 6: 64, 64: 64, 65: 128, 80: 128, 128: 128} {
		k, ok := tcFor(hd)
		require.True(t, ok, "hd %d", hd)
		require.Equal(t, want, k.hd, "hd %d", hd)
	}
	for _, hd := range []int{0, -1, 129, 256} {
		_, ok := tcFor(hd)
		require.False(t, ok, "hd %d falls back to float32", hd)
	}
	k64, _ := tcFor(64)
	k128, _ := tcFor(128)
	require.Equal(t, []tcKernel{k64, k128}, tcKernels())
	require.Equal(t, "attn_fwd_tc128", k128.fwdName())
	require.Equal(t, "attn_bwd_dq_tc64", k64.dqName())
	require.Equal(t, "attn_bwd_dkdv_tc128", k128.dkdvName())
	for _, k := range tcKernels() {
		for _, name := range []string{k.fwdName(), k.dqName(), k.dkdvName()} {
			require.Contains(t, kernelNames, name)
		}
		// Forward and dQ fit the default 48 KiB; dK/dV needs the opt-in,
		// which every device of compute capability ≥ 8.0 offers (99 KiB
		// on sm_86/sm_89).
		require.LessOrEqual(t, k.fwdSmem(), 48<<10)
		require.LessOrEqual(t, k.dqSmem(), 48<<10)
		require.LessOrEqual(t, k.dkdvSmem(), 99<<10)
	}
	// The sizes check.cc launches with (tcFwdSmem, tcDqSmem, tcDkdvSmem):
	// hd 128, 64-key forward steps: 2·(64·136 + 128·72) bytes.
	require.Equal(t, 35840, k128.fwdSmem())
	require.Equal(t, 27648, k128.dqSmem())                                 // 2·(2·32·136 + 128·40)
	require.Equal(t, 2*(2*64*136+2*32*136+2*128*40)+8*32, k128.dkdvSmem()) // 72960
	require.Equal(t, 18432, k64.fwdSmem())
	require.Equal(t, 55808, k64.dkdvSmem())
}

func TestLMChunk(t *testing.T) {
	def := lmBudget{elems: lmMaxElems, minCols: lmMinVocab}
	for _, c := range []struct {
		name               string
		rows, vocab        int
		b                  lmBudget
		wantRows, wantCols int
	}{
		// A training step's 8 × 1,024 tokens at Qwen's vocabulary: every
		// row, 32 Mi / 8,192 = 4,096 columns (38 chunks).
		{"0.6B step", 8192, 151936, def, 8192, 4096},
		{"4B step", 4096, 151936, def, 4096, 8192},
		// More rows than 32 Mi / 4,096: chunks of 8,192 rows.
		{"long batch", 20000, 151936, def, 8192, 4096},
		// Few rows: the whole vocabulary when it fits (a decode step).
		{"decode", 32, 151936, def, 32, 151936},
		// A budget's column count is rounded down to a multiple of 128.
		{"rounded", 1000, 151936, def, 1000, 33536},
		{"small vocabulary", 260, 4200, def, 260, 4200},
		{"empty", 0, 3, def, 1, 3},
		// The plan before issue #37 (8 Mi elements, 32,768 columns): 256
		// rows at a time.
		{"before", 8192, 151936, lmBudget{elems: 8 << 20, minCols: 32768}, 256, 32768},
	} {
		nr, nc := lmChunk(c.rows, c.vocab, c.b)
		require.Equal(t, c.wantRows, nr, c.name)
		require.Equal(t, c.wantCols, nc, c.name)
		require.LessOrEqual(t, nr*nc, max(c.b.elems, c.vocab), c.name)
	}
}

// lmBackwardBytes is what LogProbEntropyBackward's cuBLAS products move in
// BF16 precision (Counters.GemmBytes) for rows × vocab logits of dim
// inputs under budget b, written out from the code's loops: per chunk of
// rn rows and cn columns, the logits z = h_r·W_cᵀ (h_r and W_c bf16 read,
// z float32 written), dh_r += dZ·W_c (dZ and W_c read, dh_r read and
// written) and dW_c += dZᵀ·h_r (dZ and h_r read, dW_c read and written).
func lmBackwardBytes(rows, vocab, dim int, b lmBudget) int64 {
	nr, nc := lmChunk(rows, vocab, b)
	var total int64
	for r0 := 0; r0 < rows; r0 += nr {
		rn := int64(min(nr, rows-r0))
		for c0 := 0; c0 < vocab; c0 += nc {
			cn, d := int64(min(nc, vocab-c0)), int64(dim)
			total += 2*rn*d + 2*cn*d + 4*rn*cn // logits
			total += 2*rn*cn + 2*cn*d + 8*rn*d // dh
			total += 2*rn*cn + 2*rn*d + 8*cn*d // dW
		}
	}
	return total
}

// TestLMHeadBytesPerStep prints what the LM head's backward products move
// per training step at the benchmark's shapes, before and after issue
// #37's chunking, and holds the new plan to under a quarter of the old:
// the dW re-reads (once per 256-row chunk) are what went.
func TestLMHeadBytesPerStep(t *testing.T) {
	old := lmBudget{elems: 8 << 20, minCols: 32768}
	def := lmBudget{elems: lmMaxElems, minCols: lmMinVocab}
	for _, s := range []struct {
		name             string
		rows, vocab, dim int
	}{
		{"Qwen3-0.6B", 8192, 151936, 1024}, {"Qwen3-1.7B", 8192, 151936, 2048}, {"Qwen3-4B", 4096, 151936, 2560},
	} {
		before, after := lmBackwardBytes(s.rows, s.vocab, s.dim, old), lmBackwardBytes(s.rows, s.vocab, s.dim, def)
		t.Logf("%s: LM head backward products move %.1f GB per step, %.1f GB before", s.name, float64(after)/1e9, float64(before)/1e9)
		require.Less(t, 4*after, before, s.name)
	}
}

func TestPackArgs(t *testing.T) {
	buf, offs, err := packArgs(devPtr(0x1122334455667788), int32(-3), float32(1.5), int64(7), int32(9), devPtr(1))
	require.NoError(t, err)
	// ptr at 0; int32 at 8; float32 at 12; int64 aligned to 16; int32 at
	// 24; ptr aligned from 28 to 32.
	require.Equal(t, []int32{0, 8, 12, 16, 24, 32}, offs)
	require.Len(t, buf, 40)
	require.Equal(t, uint64(0x1122334455667788), binary.LittleEndian.Uint64(buf[0:]))
	require.Equal(t, int32(-3), int32(binary.LittleEndian.Uint32(buf[8:])))
	require.Equal(t, float32(1.5), math.Float32frombits(binary.LittleEndian.Uint32(buf[12:])))
	require.Equal(t, uint64(7), binary.LittleEndian.Uint64(buf[16:]))
	_, _, err = packArgs(3) // a Go int has no fixed kernel type
	require.Error(t, err)
}

func TestGemmSpan(t *testing.T) {
	// One 3×4 matrix with ld 4: 12 elements; with ld 6 the last row still
	// ends after 4: 2·6 + 4 = 16. Batches of 3 at stride 20: 40 + 16.
	require.Equal(t, int64(12), gemmSpan(3, 4, 4, 1, 0))
	require.Equal(t, int64(16), gemmSpan(3, 4, 6, 1, 0))
	require.Equal(t, int64(56), gemmSpan(3, 4, 6, 3, 20))
	require.Equal(t, int64(16), gemmSpan(3, 4, 6, 3, 0), "stride 0 reuses one matrix")
	require.Equal(t, int64(0), gemmSpan(0, 4, 4, 1, 0))
}

// TestDWPlan: chunks of at least 128 rows, at most 256 chunks, chunk rows
// a multiple of 8 covering every row with the last chunk non-empty.
func TestDWPlan(t *testing.T) {
	cases := []struct{ rows, chunks, chunkRows int }{
		{0, 0, 0},
		{1, 1, 8},
		{128, 1, 128},
		{129, 2, 72},            // ⌈129/2⌉ = 65 → 72; ⌈129/72⌉ = 2
		{300, 3, 104},           // ⌈300/3⌉ = 100 → 104
		{8192, 64, 128},         // 8 × 1,024 tokens, a hidden-size norm
		{4096, 32, 128},         // 4 × 1,024 tokens
		{131072, 256, 512},      // 8,192 tokens × 16 query heads: capped at 256 chunks
		{40000, 250, 160},       // ⌈40000/256⌉ = 157 → 160; ⌈40000/160⌉ = 250
		{1 << 24, 256, 1 << 16}, // many rows: 65,536 per chunk
	}
	for _, c := range cases {
		n, r := dwPlan(c.rows)
		require.Equal(t, c.chunks, n, "rows %d", c.rows)
		require.Equal(t, c.chunkRows, r, "rows %d", c.rows)
		if c.rows > 0 {
			require.Zero(t, r%dwLanes)
			require.GreaterOrEqual(t, n*r, c.rows, "every row in a chunk")
			require.Less(t, (n-1)*r, c.rows, "no empty chunk")
		}
	}
}

func TestRowThreads(t *testing.T) {
	cases := []struct {
		dim  int
		want uint32
	}{{1, 32}, {128, 32}, {130, 64}, {1024, 256}, {2560, 256}, {8192, 256}}
	for _, c := range cases {
		require.Equal(t, c.want, rowThreads(c.dim), "dim %d", c.dim)
	}
}
