package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

// Launch geometry shared by the Go side and kernels/kernels.cu (the
// constants must agree with ATT_ROWS, ATT_BK, ATT_MAXC and GT there).
const (
	blockElem   = 256       // threads per block of elementwise kernels
	maxGrid1D   = 65535 * 8 // grid-stride loops cover the rest
	blockRow    = 256       // threads per block of row kernels (RMSNorm, LM head)
	attRows     = 4         // query (or key) rows per attention block, a warp each
	attBK       = 32        // keys (or queries) per shared-memory tile, a lane each
	attMaxHead  = 256       // largest head dim: 8 channels per lane
	gemmTile    = 16        // tile of the fallback GEMM kernel
	decodeMaxQ  = 4         // spans with at most this many queries may decode split-K
	decodeChunk = 256       // keys per split of the decode kernel
	decodeMaxSp = 64        // most splits per row
	lmMaxElems  = 32 << 20  // largest logits chunk, in float32 elements (128 MiB)
	lmMinVocab  = 4096      // vocabulary columns per chunk at least (fewer only in a smaller vocabulary)
)

// The RMSNorm weight gradient's two stages (rmsnorm_dw_partial and
// rmsnorm_dw_finish; DW_COLS and DW_LANES in kernels.cu).
const (
	dwCols      = 32  // columns per block of the first stage
	dwLanes     = 8   // row lanes per block of the first stage
	dwMinRows   = 128 // rows per chunk at least (16 per thread)…
	dwMaxChunks = 256 // …unless that makes more chunks than this
)

// dwPlan splits rows into the chunks of rmsnorm_dw_partial: chunks of at
// least dwMinRows rows (enough per thread to hide the loads' latency),
// at most dwMaxChunks of them (the second stage's work and the scratch
// of chunks·dim float64), chunkRows a multiple of dwLanes. It depends on
// the row count only — not on the device — so the summation order, and
// with it the result, is the same on every GPU. 0 rows give 0 chunks.
func dwPlan(rows int) (chunks, chunkRows int) {
	if rows <= 0 {
		return 0, 0
	}
	chunks = min(max((rows+dwMinRows-1)/dwMinRows, 1), dwMaxChunks)
	chunkRows = (rows + chunks - 1) / chunks
	chunkRows = (chunkRows + dwLanes - 1) / dwLanes * dwLanes
	return (rows + chunkRows - 1) / chunkRows, chunkRows
}

// rowThreads is the block size of the row kernels (rmsnorm_fwd,
// rmsnorm_bwd_dx: a block per row) for rows of dim values: about 4
// values per thread, whole warps, at most blockRow threads. Qwen3's
// per-head norms (dim 128) take one warp per row instead of 256 threads
// of which 128 would idle.
func rowThreads(dim int) uint32 {
	t := (dim + 3) / 4
	t = (t + 31) / 32 * 32
	return uint32(min(max(t, 32), blockRow))
}

// grid1D is the number of blocks of size block for a grid-stride loop over
// n elements: enough to cover n, at most maxGrid1D; 0 when n is 0.
func grid1D(n int64, block int) uint32 {
	if n <= 0 {
		return 0
	}
	g := (n + int64(block) - 1) / int64(block)
	return uint32(min(g, maxGrid1D))
}

// attnTiles splits the query rows of every span into tiles of up to rows
// consecutive rows (attRows for the float32 kernels, tcRows for the
// tensor-core ones). Each tile is {first query row, rows, first key row,
// keys visible to its first row}; row i of a tile sees one key more than
// row i−1 (query i of a span sees KLen−QLen+i+1 keys).
func attnTiles(spans []backend.Span, rows int) []int32 {
	var t []int32
	for _, s := range spans {
		past := s.KLen - s.QLen
		for r := 0; r < s.QLen; r += rows {
			n := min(rows, s.QLen-r)
			t = append(t, int32(s.Q0+r), int32(n), int32(s.K0), int32(past+r+1))
		}
	}
	return t
}

// attnKeyTiles splits the key rows of every span that has queries into
// tiles of up to rows rows for the dK/dV kernels. Each tile is {first key
// row, rows, index of the first key within its span, first query row of
// the span, QLen, KLen−QLen}.
func attnKeyTiles(spans []backend.Span, rows int) []int32 {
	var t []int32
	for _, s := range spans {
		if s.QLen == 0 {
			continue
		}
		for j := 0; j < s.KLen; j += rows {
			n := min(rows, s.KLen-j)
			t = append(t, int32(s.K0+j), int32(n), int32(j), int32(s.Q0), int32(s.QLen), int32(s.KLen-s.QLen))
		}
	}
	return t
}

// decodePlan decides whether an attention forward is a decode step — every
// span with queries has at most decodeMaxQ of them and reads a cache
// (KLen > QLen) — and, if so, returns the per-query rows {query row, first
// key row, visible keys} and the number of key splits, enough that each
// covers at most decodeChunk keys (capped at decodeMaxSp, with chunk grown
// to match). Decode steps have too few query rows to fill the GPU with one
// block per row tile, so the keys are split across blocks instead
// (flash-decoding) and merged by a second kernel.
func decodePlan(spans []backend.Span) (rows []int32, splits, chunk int, ok bool) {
	maxK := 0
	for _, s := range spans {
		if s.QLen == 0 {
			continue
		}
		if s.QLen > decodeMaxQ || s.KLen == s.QLen {
			return nil, 0, 0, false
		}
		for i := range s.QLen {
			cnt := s.KLen - s.QLen + i + 1
			rows = append(rows, int32(s.Q0+i), int32(s.K0), int32(cnt))
			maxK = max(maxK, cnt)
		}
	}
	if len(rows) == 0 {
		return nil, 0, 0, false
	}
	splits = min((maxK+decodeChunk-1)/decodeChunk, decodeMaxSp)
	chunk = (maxK + splits - 1) / splits
	return rows, splits, chunk, true
}

// Dynamic shared memory of the attention kernels, in bytes, for head dim hd.
func attnFwdSmem(hd int) int    { return 4 * (attRows*hd + attBK*(hd+1)) }
func attnDecodeSmem(hd int) int { return 4 * (hd + attBK*(hd+1)) }
func attnBwdSmem(hd int) int    { return 4 * (2*attRows*hd + 2*attBK*(hd+1)) }

// Tensor-core attention (the attn_*_tc* kernels; constants as TC_ROWS and
// TC_PAD in kernels.cu).
const (
	tcRows    = 64  // query rows (forward, dQ) or key rows (dK/dV) per block: 4 warps × 16
	tcThreads = 128 // threads per block
	tcPad     = 8   // bf16 elements of padding per shared-memory row
	tcMaxHead = 128 // largest head dim; smaller ones are zero-padded to 64 or 128
)

// tcKernel is one instantiation of the tensor-core attention kernels: the
// padded head dim hd, the keys per step of the forward (fwdStep) and the
// keys (dQ) or queries (dK/dV) per step of the backward (bwdStep), as the
// extern "C" wrappers at the end of kernels.cu's tensor-core section
// instantiate them.
type tcKernel struct{ hd, fwdStep, bwdStep int }

// tcFor returns the instantiation for head dim hd: the 64 kernels up to 64,
// the 128 kernels up to 128; ok is false for larger (or non-positive) head
// dims, which the float32 kernels serve.
func tcFor(hd int) (k tcKernel, ok bool) {
	switch {
	case hd <= 0:
		return tcKernel{}, false
	case hd <= 64:
		return tcKernel{hd: 64, fwdStep: 64, bwdStep: 64}, true
	case hd <= tcMaxHead:
		// 32-row steps in the backward keep the accumulators in registers.
		return tcKernel{hd: 128, fwdStep: 64, bwdStep: 32}, true
	}
	return tcKernel{}, false
}

// tcKernels lists the instantiations (what open sets shared memory for).
func tcKernels() []tcKernel {
	k64, _ := tcFor(64)
	k128, _ := tcFor(128)
	return []tcKernel{k64, k128}
}

func (k tcKernel) fwdName() string  { return fmt.Sprintf("attn_fwd_tc%d", k.hd) }
func (k tcKernel) dqName() string   { return fmt.Sprintf("attn_bwd_dq_tc%d", k.hd) }
func (k tcKernel) dkdvName() string { return fmt.Sprintf("attn_bwd_dkdv_tc%d", k.hd) }

// Dynamic shared memory of the tensor-core kernels in bytes: bf16 tiles of
// rows × (hd+tcPad) (row-major) and hd × (rows+tcPad) (transposed), as
// laid out at the top of each kernel.
func (k tcKernel) fwdSmem() int {
	return 2 * (k.fwdStep*(k.hd+tcPad) + k.hd*(k.fwdStep+tcPad)) // K, Vᵀ
}
func (k tcKernel) dqSmem() int {
	return 2 * (2*k.bwdStep*(k.hd+tcPad) + k.hd*(k.bwdStep+tcPad)) // K, V, Kᵀ
}
func (k tcKernel) dkdvSmem() int {
	// K, V of the block; Q, dO and their transposes per step; lse and D.
	return 2*(2*tcRows*(k.hd+tcPad)+2*k.bwdStep*(k.hd+tcPad)+2*k.hd*(k.bwdStep+tcPad)) + 8*k.bwdStep
}

// lmBudget sizes the LM head's logits chunks (lmChunk): at most elems
// float32 elements, at least minCols vocabulary columns. Backends use
// {lmMaxElems, lmMinVocab}; tests shrink it to make several chunks of a
// shape small enough to emulate.
type lmBudget struct{ elems, minCols int }

// lmChunk is the logits block of the LM-head kernels: nr rows by nc
// vocabulary columns, at most b.elems elements. It takes every row when
// rows·b.minCols fits (8,192 rows at the default: a training step's
// batch), and then as many columns as the budget leaves, in multiples of
// 128. So the weight gradient's slice of each vocabulary chunk, dW_c +=
// dZ_cᵀ·h, is read and written once per backward instead of once per
// row chunk (with 256-row chunks that was 32 times at 8,192 rows: ≈ 40
// GB per 0.6B step), and the input gradient dh += dZ_c·W_c is one product
// over all rows (hundreds of output tiles, not the 16 of a 256-row
// chunk). What remains is dh read and written once per vocabulary chunk
// (rows·dim·8 bytes each, 38 chunks at 0.6B). lmBackwardBytes counts it.
func lmChunk(rows, vocab int, b lmBudget) (nr, nc int) {
	minCols := max(1, min(vocab, b.minCols))
	nr = max(1, min(rows, b.elems/minCols))
	nc = max(1, min(vocab, b.elems/nr))
	if nc < vocab && nc >= 128 {
		nc = nc / 128 * 128
	}
	return nr, nc
}

// kernel argument types, packed by packArgs.
type (
	argF32 = float32
	argI32 = int32
	argI64 = int64
)

// packArgs lays out kernel parameters for cuLaunchKernel, which takes an
// array of pointers, one per parameter: the values go into one byte slice,
// each aligned to its size, and offs[i] is where parameter i starts.
// Device pointers (devPtr) take 8 bytes, int32 and float32 4, int64 8.
func packArgs(args ...any) (buf []byte, offs []int32, err error) {
	for i, a := range args {
		var size int
		switch a.(type) {
		case devPtr, int64:
			size = 8
		case int32, float32:
			size = 4
		default:
			return nil, nil, fmt.Errorf("gpu: kernel argument %d has unsupported type %T", i, a)
		}
		for len(buf)%size != 0 {
			buf = append(buf, 0)
		}
		offs = append(offs, int32(len(buf)))
		switch v := a.(type) {
		case devPtr:
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		case int64:
			buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
		case int32:
			buf = binary.LittleEndian.AppendUint32(buf, uint32(v))
		case float32:
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
	}
	return buf, offs, nil
}

// gemmSpan is the number of elements a row-major matrix operand spans:
// rows×cols stored with leading dimension ld (rows of ld elements), over
// batch matrices stride apart.
func gemmSpan(rows, cols, ld, batch int, stride int64) int64 {
	if rows == 0 || cols == 0 {
		return 0
	}
	return int64(batch-1)*stride + int64(rows-1)*int64(ld) + int64(cols)
}
