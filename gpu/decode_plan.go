package gpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

// The host side of the decode kernels (kernels/decode.cu): the layout of
// a paged step as one int32 array, the split-K plan, the kernel and
// shared memory of each launch, and the sampling parameters. Pure Go, so
// that it is tested without cgo; decode_cuda.go launches.

// Launch geometry shared with kernels/decode.cu.
const (
	decodeRowsMaxQ   = 4 // sequences with at most this many new rows decode split-K; longer ones prefill by tiles
	prefillRows      = 4 // PF_ROWS: query rows per prefill tile, a warp each
	prefillThreads   = 32 * prefillRows
	decodeMinChunk   = 64   // fewest keys per split
	decodeWarps      = 4096 // split-K aims for about this many warps per call
	decodeMaxSplits  = 64
	decodeKeyBucket  = 256 // the split-K plan is made for the keys rounded up to this: a shape that lasts 256 steps (graphs)
	decodeMaxHeadDim = 256 // the largest instantiation
	sampleMaxThreads = 1024
	sampleParamInts  = 9 // per row: flags, top-k, seed (2), step (2), 1/T, top-p, min-p
)

// decodeKernelNames lists the kernels of the decode module.
var decodeKernelNames = func() []string {
	names := []string{"kv_append_f32", "kv_append_bf16", "kv_copy_blocks", "paged_combine", "paged_prefill_f32", "paged_prefill_bf16", "sample_rows"}
	for _, t := range []string{"f32", "bf16"} {
		for _, hd := range []int{128, 256} {
			for _, g := range []int{2, 4, 8} {
				names = append(names, fmt.Sprintf("paged_decode_%s_g%d_h%d", t, g, hd))
			}
		}
	}
	return names
}()

// pagedPlan is a step's layout as the kernels read it, one int32 array
// uploaded once per step:
//
//	slots [Rows]                      the cache row of each new row, −1 for none
//	decode rows {query row, table offset, visible keys} for sequences of ≤ decodeRowsMaxQ new rows
//	prefill tiles {first row, rows, table offset, keys visible to the first row} for the others
//	block tables, sequence after sequence
type pagedPlan struct {
	ints               []int32
	rowsOff, nDecode   int
	tilesOff, nTiles   int
	tabsOff, maxDecode int // maxDecode: the most keys a decode row sees
}

// planPaged lays out step s (slots from backend.CheckPagedStep).
func planPaged(spec backend.KVCacheSpec, s backend.PagedStep, slots []int32) pagedPlan {
	var p pagedPlan
	var rows, tiles, tabs []int32
	for _, q := range s.Seqs {
		if q.QLen == 0 {
			continue
		}
		tab := int32(len(tabs))
		tabs = append(tabs, q.Blocks[:(q.KLen+spec.BlockSize-1)/spec.BlockSize]...)
		past := q.KLen - q.QLen
		if q.QLen <= decodeRowsMaxQ {
			for i := range q.QLen {
				rows = append(rows, int32(q.Q0+i), tab, int32(past+i+1))
				p.maxDecode = max(p.maxDecode, past+i+1)
			}
			continue
		}
		for r := 0; r < q.QLen; r += prefillRows {
			tiles = append(tiles, int32(q.Q0+r), int32(min(prefillRows, q.QLen-r)), tab, int32(past+r+1))
		}
	}
	p.ints = append(p.ints, slots...)
	p.rowsOff, p.nDecode = len(p.ints), len(rows)/3
	p.ints = append(p.ints, rows...)
	p.tilesOff, p.nTiles = len(p.ints), len(tiles)/4
	p.ints = append(p.ints, tiles...)
	p.tabsOff = len(p.ints)
	p.ints = append(p.ints, tabs...)
	return p
}

// decodeSplits chooses the split-K of nd decode rows, each served by
// blocksPerRow blocks (KV heads × head groups), over at most maxK keys:
// enough splits that the call has about decodeWarps warps, each split at
// least decodeMinChunk keys, at most decodeMaxSplits; chunk is the keys
// per split.
func decodeSplits(nd, blocksPerRow, maxK int) (splits, chunk int) {
	if nd == 0 || maxK == 0 {
		return 1, max(maxK, 1)
	}
	want := (decodeWarps + nd*blocksPerRow - 1) / (nd * blocksPerRow)
	splits = max(1, min(want, (maxK+decodeMinChunk-1)/decodeMinChunk, decodeMaxSplits))
	chunk = (maxK + splits - 1) / splits
	return splits, chunk
}

// decodeBucket rounds the most keys a decode row sees up to a multiple
// of decodeKeyBucket, the keys the split-K plan is made for. The splits
// past a row's keys are empty (paged_combine skips them), and the plan,
// and with it every launch of the step, stays the same for 256 steps of
// the same batch: what a CUDA graph replays (WithCUDAGraphs).
func decodeBucket(maxK int) int {
	if maxK <= 0 {
		return 0
	}
	return (maxK + decodeKeyBucket - 1) / decodeKeyBucket * decodeKeyBucket
}

// decodeKernel picks the paged_decode instantiation for a head layout:
// the cache type, the smallest of 2, 4 or 8 query heads per block that
// holds a KV head's group (larger groups take several blocks: ngrp) and
// the smallest head-dim bound (128, 256) that holds hd.
func decodeKernel(bf16 bool, heads, kvheads, hd int) (name string, maxg, ngrp, hdMax int, err error) {
	if hd > decodeMaxHeadDim || hd < 1 || kvheads < 1 || heads%kvheads != 0 {
		return "", 0, 0, 0, fmt.Errorf("%w: paged attention of %d/%d heads of dim %d (the GPU kernels take head dims up to %d)", backend.ErrArg, heads, kvheads, hd, decodeMaxHeadDim)
	}
	group := heads / kvheads
	switch {
	case group <= 2:
		maxg = 2
	case group <= 4:
		maxg = 4
	default:
		maxg = 8
	}
	hdMax = 128
	if hd > 128 {
		hdMax = 256
	}
	t := "f32"
	if bf16 {
		t = "bf16"
	}
	return fmt.Sprintf("paged_decode_%s_g%d_h%d", t, maxg, hdMax), maxg, (group + maxg - 1) / maxg, hdMax, nil
}

// decodeSmem is the dynamic shared memory of a paged_decode instantiation
// in bytes: the queries (maxg·hdMax floats), the key tile (32 rows of
// hdMax + 16 bytes of padding) and the value tile (32 rows of hdMax).
func decodeSmem(bf16 bool, maxg, hdMax int) int {
	el := 4
	if bf16 {
		el = 2
	}
	return 4*maxg*hdMax + 32*(hdMax+16/el)*el + 32*hdMax*el
}

// prefillSmem is paged_prefill's dynamic shared memory for head dim hd.
func prefillSmem(hd int) int { return 4 * (prefillRows*hd + 32*(hd+1)) }

// decodeKernelSmem is the largest dynamic shared memory each decode kernel
// is launched with (the loader allows it).
func decodeKernelSmem() map[string]int {
	out := map[string]int{"paged_prefill_f32": prefillSmem(decodeMaxHeadDim), "paged_prefill_bf16": prefillSmem(decodeMaxHeadDim)}
	for _, bf := range []bool{false, true} {
		for _, hd := range []int{128, 256} {
			for _, g := range []int{2, 4, 8} {
				name, maxg, _, hdMax, _ := decodeKernel(bf, 8*g, 8, hd)
				out[name] = decodeSmem(bf, maxg, hdMax)
			}
		}
	}
	return out
}

// sampleThreads is sample_rows' block size for a vocabulary: a thread per
// 8 logits, a power of two from 32 to 1,024.
func sampleThreads(vocab int) int {
	t := 32
	for t < sampleMaxThreads && t*8 < vocab {
		t *= 2
	}
	return t
}

// packSampleParams lays out rows for sample_rows.
func packSampleParams(rows []backend.SampleRow) []int32 {
	out := make([]int32, 0, sampleParamInts*len(rows))
	for _, r := range rows {
		flags, invT := int32(0), float32(1)
		if r.Greedy {
			flags = 1
		} else {
			invT = float32(1 / r.Temperature)
		}
		out = append(out, flags, int32(r.TopK),
			int32(uint32(r.Seed)), int32(uint32(r.Seed>>32)), int32(uint32(r.Step)), int32(uint32(r.Step>>32)),
			int32(math.Float32bits(invT)), int32(math.Float32bits(float32(r.TopP))), int32(math.Float32bits(float32(r.MinP))))
	}
	return out
}

// unpackSampleResults reads sample_rows' output, three 32-bit words per
// row (token, log-prob bits, raw log-prob bits), downloaded as float32.
func unpackSampleResults(raw []float32, out []backend.SampleResult) {
	for i := range out {
		out[i] = backend.SampleResult{
			Token:      int32(math.Float32bits(raw[3*i])),
			LogProb:    raw[3*i+1],
			RawLogProb: raw[3*i+2],
		}
	}
}

// kvCacheBytes is the device memory of a cache: per layer, keys and
// values of every block, bfloat16 or float32.
func kvCacheBytes(s backend.KVCacheSpec, bf16 bool) int64 {
	el := int64(4)
	if bf16 {
		el = 2
	}
	return 2 * el * int64(s.Layers) * int64(s.Blocks) * int64(s.BlockSize) * int64(s.Width())
}

// stageSlot is the room a staged array of n bytes takes in a round
// trip's upload block: the smallest power of two of at least stageAlign
// bytes that holds it. The arrays after a growing one (a decode step's
// block tables gain a block every few steps somewhere in a batch) then
// keep their offsets, and the block its size, until it doubles: the
// step's launches, which take those addresses, stay the same, and its
// CUDA graph replays (WithCUDAGraphs). The room left over costs bytes of
// a copy of kilobytes.
func stageSlot(n int) int {
	p := stageAlign
	for p < n {
		p *= 2
	}
	return p
}

// stageAlign is the least room, and the alignment, of a staged array.
const stageAlign = 256
