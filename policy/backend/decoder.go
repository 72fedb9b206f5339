package backend

import (
	"fmt"
	"math"
	"slices"
)

// Decoder is implemented by backends that run generation's decode loop in
// their own memory, so that per step only token ids and log-probabilities
// cross to the host:
//
//   - a paged KV cache (vLLM's PagedAttention, Kwon et al., 2023): per
//     layer, fixed-size blocks of key and value rows; a sequence's rows
//     are found through its block table, so sequences of any length,
//     sessions kept between turns and shared prompt prefixes live in one
//     pool without copies;
//   - per forward step, one append of the step's new key and value rows
//     per layer (AppendKV) and one attention call per layer over the pages
//     (PagedAttention), for prefill chunks and decode rows mixed;
//   - sampling over logits that stay in the backend's memory (SampleRows).
//
// A step's layout (block tables, where each new row goes) is handed over
// once with PrepareStep, and the per-layer calls refer to it. Methods are
// called from one goroutine at a time per KVCache; see each method for
// shapes. Bad arguments are errors wrapping ErrShape, ErrIndex, ErrBuffer
// or ErrArg, as for Kernels.
type Decoder interface {
	// MemoryInfo reports the memory KV caches are allocated from, so that
	// a caller can size one as a fraction of it (vLLM's
	// gpu_memory_utilization).
	MemoryInfo() (MemoryInfo, error)
	// KVBlockBytes is the memory one block of a cache of shape s takes,
	// keys and values of every layer: the backend chooses the storage
	// type (float32, or bfloat16 on a GPU in bf16 precision).
	KVBlockBytes(s KVCacheSpec) (int64, error)
	// NewKVCache allocates a cache of s.Blocks blocks. Its contents are
	// undefined until rows are appended.
	NewKVCache(s KVCacheSpec) (KVCache, error)
	// FreeKVCache releases c; using it afterwards is an ErrBuffer error.
	FreeKVCache(c KVCache) error
	// CopyKVBlocks copies block src[i] to block dst[i] in every layer,
	// keys and values (the copy-on-write of a shared, partly filled
	// block). No block may appear both as a source and a destination.
	CopyKVBlocks(c KVCache, src, dst []int32) error
	// PrepareStep checks s against c and hands the layout of one forward
	// step to the backend (on a GPU, one upload). The layout is valid
	// until ReleaseStep.
	PrepareStep(c KVCache, s PagedStep) (PagedLayout, error)
	// ReleaseStep frees what PrepareStep allocated.
	ReleaseStep(l PagedLayout) error
	// AppendKV writes layer's keys k and values v of the step's new rows,
	// [Rows, KVHeads·HeadDim] each, into the cache: row Q0+i of sequence
	// s goes to position KLen−QLen+i of s. Rows in no sequence are
	// ignored.
	AppendKV(l PagedLayout, layer int, k, v Buffer) error
	// PagedAttention computes, for every sequence of the step and query
	// head, causal attention of the new rows' queries q [Rows, Heads,
	// HeadDim] over the sequence's cached keys and values of layer: query
	// i of sequence s, at position KLen−QLen+i, sees positions 0 …
	// KLen−QLen+i (its own included, so AppendKV comes first). out
	// [Rows, Heads, HeadDim]; rows in no sequence get zeros. a.KVHeads
	// and a.HeadDim must be the cache's.
	PagedAttention(l PagedLayout, layer int, a Attention, out, q Buffer) error
	// SampleRows draws one token from each row of logits [len(rows),
	// vocab] by rows[i]'s parameters (see SampleRow for the exact rule)
	// and writes out[i]. A row whose logits hold a NaN or +Inf, or no
	// finite value, gets Token −1 and no error: the caller decides what
	// fails.
	SampleRows(logits Buffer, vocab int, rows []SampleRow, out []SampleResult) error
}

// MemoryInfo describes the memory a Decoder allocates KV caches from, in
// bytes: device memory on a GPU, host memory (Host true) on the CPU.
type MemoryInfo struct {
	Free, Total int64
	Host        bool
}

// KVCacheSpec is the shape of a paged KV cache: Layers layers, each with
// Blocks blocks of BlockSize rows of keys and of values, a row holding
// KVHeads·HeadDim values (one token's keys, or values, of one layer).
// Position p of a sequence whose block table is t sits in block
// t[p/BlockSize], row p%BlockSize.
type KVCacheSpec struct {
	Layers, KVHeads, HeadDim int
	BlockSize, Blocks        int
}

// Width is the values of one row: KVHeads·HeadDim.
func (s KVCacheSpec) Width() int { return s.KVHeads * s.HeadDim }

// Check reports a spec with a non-positive field as an ErrShape error.
func (s KVCacheSpec) Check() error {
	if s.Layers < 1 || s.KVHeads < 1 || s.HeadDim < 1 || s.BlockSize < 1 || s.Blocks < 1 {
		return fmt.Errorf("%w: KV cache spec %+v: every field must be ≥ 1", ErrShape, s)
	}
	if int64(s.Blocks)*int64(s.BlockSize) > math.MaxInt32 {
		return fmt.Errorf("%w: KV cache of %d blocks of %d rows: more rows than int32 indexes", ErrShape, s.Blocks, s.BlockSize)
	}
	return nil
}

// KVCache is a paged KV cache allocated by a Decoder; its contents are
// reached only through the Decoder's methods.
type KVCache interface {
	// Spec is the cache's shape.
	Spec() KVCacheSpec
}

// PagedSeq is one sequence of a forward step over a paged KV cache: the
// step's new rows [Q0, Q0+QLen) are the sequence's positions KLen−QLen …
// KLen−1, and after the step's AppendKV the cache holds its positions 0 …
// KLen−1. Blocks is its block table, at least ⌈KLen/BlockSize⌉ entries.
type PagedSeq struct {
	Q0, QLen, KLen int
	Blocks         []int32
}

// PagedStep is the layout of one forward step: Rows new rows (the rows of
// the step's q, k and v buffers), grouped into sequences whose row ranges
// do not overlap. A sequence with QLen 0 is allowed and ignored.
type PagedStep struct {
	Rows int
	Seqs []PagedSeq
}

// PagedLayout is a PagedStep handed to a Decoder by PrepareStep.
type PagedLayout interface {
	// Step is the layout as given.
	Step() PagedStep
	// Cache is the cache it was prepared for.
	Cache() KVCache
}

// CheckPagedStep validates s against the cache shape c: row ranges inside
// [0, Rows) and disjoint, 0 ≤ QLen ≤ KLen, block tables long enough with
// ids in [0, Blocks), and no two new rows written to the same cache row.
// It returns, per new row, the cache row ("slot", block·BlockSize +
// offset) it is written to, −1 for rows in no sequence.
func CheckPagedStep(c KVCacheSpec, s PagedStep) ([]int32, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if s.Rows < 0 {
		return nil, fmt.Errorf("%w: paged step of %d rows", ErrShape, s.Rows)
	}
	slots := make([]int32, s.Rows)
	for i := range slots {
		slots[i] = -1
	}
	bs := c.BlockSize
	for i, q := range s.Seqs {
		if q.QLen < 0 || q.KLen < q.QLen || q.Q0 < 0 || q.Q0 > s.Rows-q.QLen {
			return nil, fmt.Errorf("%w: paged step sequence %d: rows [%d, %d+%d) of %d, %d positions", ErrShape, i, q.Q0, q.Q0, q.QLen, s.Rows, q.KLen)
		}
		if need := (q.KLen + bs - 1) / bs; len(q.Blocks) < need {
			return nil, fmt.Errorf("%w: paged step sequence %d: %d positions need %d blocks, the table has %d", ErrShape, i, q.KLen, need, len(q.Blocks))
		}
		for j, b := range q.Blocks[:(q.KLen+bs-1)/bs] {
			if b < 0 || int(b) >= c.Blocks {
				return nil, fmt.Errorf("%w: paged step sequence %d: block table entry %d is %d, outside [0, %d)", ErrIndex, i, j, b, c.Blocks)
			}
		}
		for r := range q.QLen {
			if slots[q.Q0+r] != -1 {
				return nil, fmt.Errorf("%w: paged step row %d belongs to two sequences", ErrShape, q.Q0+r)
			}
			p := q.KLen - q.QLen + r
			slots[q.Q0+r] = q.Blocks[p/bs]*int32(bs) + int32(p%bs)
		}
	}
	written := make([]int32, 0, len(slots))
	for _, sl := range slots {
		if sl >= 0 {
			written = append(written, sl)
		}
	}
	slices.Sort(written)
	for i := 1; i < len(written); i++ {
		if written[i] == written[i-1] {
			return nil, fmt.Errorf("%w: paged step writes cache row %d (block %d) twice", ErrIndex, written[i], int(written[i])/bs)
		}
	}
	return slots, nil
}

// CheckKVRows validates the keys or values (or queries, with width
// heads·headDim) of a step: a non-nil buffer of rows·width elements.
func CheckKVRows(name string, b Buffer, rows, width int) error {
	if b == nil {
		return fmt.Errorf("%w: %s is nil", ErrBuffer, name)
	}
	if b.Len() != rows*width {
		return fmt.Errorf("%w: %s has %d elements, want %d rows × %d", ErrShape, name, b.Len(), rows, width)
	}
	return nil
}

// CheckPagedAttention validates a PagedAttention call's head layout
// against the cache and its buffers against the step.
func CheckPagedAttention(c KVCacheSpec, rows, layer int, a Attention, out, q Buffer) error {
	if layer < 0 || layer >= c.Layers {
		return fmt.Errorf("%w: layer %d of a cache of %d layers", ErrIndex, layer, c.Layers)
	}
	if a.Heads < 1 || a.KVHeads != c.KVHeads || a.HeadDim != c.HeadDim || a.Heads%a.KVHeads != 0 {
		return fmt.Errorf("%w: attention %d/%d heads of dim %d over a cache of %d KV heads of dim %d", ErrShape, a.Heads, a.KVHeads, a.HeadDim, c.KVHeads, c.HeadDim)
	}
	if math.IsNaN(float64(a.Scale)) || math.IsInf(float64(a.Scale), 0) {
		return fmt.Errorf("%w: attention scale %v", ErrArg, a.Scale)
	}
	w := a.Heads * a.HeadDim
	if err := CheckKVRows("paged attention q", q, rows, w); err != nil {
		return err
	}
	return CheckKVRows("paged attention out", out, rows, w)
}

// CheckBlockCopy validates CopyKVBlocks' arguments.
func CheckBlockCopy(c KVCacheSpec, src, dst []int32) error {
	if len(src) != len(dst) {
		return fmt.Errorf("%w: block copy of %d sources to %d destinations", ErrShape, len(src), len(dst))
	}
	seen := make(map[int32]bool, 2*len(src))
	for i := range src {
		for _, b := range []int32{src[i], dst[i]} {
			if b < 0 || int(b) >= c.Blocks {
				return fmt.Errorf("%w: block copy %d names block %d, outside [0, %d)", ErrIndex, i, b, c.Blocks)
			}
		}
		if seen[dst[i]] {
			return fmt.Errorf("%w: block copy writes block %d twice", ErrIndex, dst[i])
		}
		seen[dst[i]] = true
	}
	for i := range src {
		if seen[src[i]] {
			return fmt.Errorf("%w: block %d is both copied and overwritten", ErrIndex, src[i])
		}
	}
	return nil
}

// SampleRow is how one token is drawn from a row of logits z:
//
//   - Greedy: the first maximal logit (torch.argmax), LogProb 0.
//   - Otherwise, with weights w_i = exp(z_i/T − max(z)/T) (T the
//     Temperature), vLLM's order of truncation
//     (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py): min-p keeps
//     the tokens with w_i > 0 and w_i ≥ MinP; top-k (0 < TopK < kept) then
//     keeps those whose logit is at least the TopK-th largest kept logit
//     (ties with it included); top-p (0 < TopP < 1) then keeps, in order
//     of decreasing logit and increasing id, each token whose preceding
//     kept weight is below TopP times the kept total. The token is then
//     chosen by inversion: with u = SampleUniform(Seed, Step) and W the
//     kept total, the first kept token in increasing id order whose
//     cumulative kept weight exceeds u·W (the last kept one if rounding
//     leaves none). LogProb is log(w_token/W).
//
// RawLogProb is always the log-softmax of the unprocessed logits at the
// token. Because the random number depends only on (Seed, Step), a row's
// token does not depend on the other rows of the call: Seed per
// generation, Step the index of the token in it.
//
// TopLogprobs > 0 also asks for the row's TopLogprobs most likely tokens
// (all of them when the vocabulary is smaller) in SampleResult.Top: by
// decreasing logit, ties by increasing id, each with its RawLogProb and
// its LogProb under the distribution drawn from — log(w_i/W) for a kept
// token, −Inf for one truncation removed; with Greedy 0 for the drawn
// token and −Inf for the others. (The kept set is always a prefix of that
// order, so it is the order of both log-probabilities.)
//
// Backends follow this rule up to their arithmetic: a token whose
// cumulative weight lies within rounding of u·W, a kept set whose
// boundary lies within rounding, or a weight that underflows (below
// ≈1e-38 of the largest) may differ between backends.
type SampleRow struct {
	Greedy      bool
	Temperature float64 // > 0 unless Greedy
	TopK        int     // 0: no top-k
	TopP        float64 // 0 or 1: no top-p
	MinP        float64 // 0: no min-p
	Seed, Step  uint64
	TopLogprobs int // 0: no SampleResult.Top
}

// SampleResult is the token drawn from one row and its log-probabilities
// (see SampleRow); Token −1 marks logits that could not be sampled.
type SampleResult struct {
	Token      int32
	LogProb    float32
	RawLogProb float32
	// Top lists the row's most likely tokens when SampleRow.TopLogprobs
	// asks for them; nil otherwise.
	Top []TopLogProb
}

// TopLogProb is one of a row's most likely tokens (SampleResult.Top).
type TopLogProb struct {
	Token      int32
	LogProb    float32
	RawLogProb float32
}

// CheckSampleRows validates a SampleRows call.
func CheckSampleRows(logits Buffer, vocab int, rows []SampleRow, out []SampleResult) error {
	if vocab < 1 {
		return fmt.Errorf("%w: sampling over a vocabulary of %d", ErrShape, vocab)
	}
	if len(out) != len(rows) {
		return fmt.Errorf("%w: %d sample rows, %d results", ErrShape, len(rows), len(out))
	}
	if len(rows) > 0 && logits == nil {
		return fmt.Errorf("%w: sampling from nil logits", ErrBuffer)
	}
	if logits != nil && logits.Len() < len(rows)*vocab {
		return fmt.Errorf("%w: logits of %d elements for %d rows of %d", ErrShape, logits.Len(), len(rows), vocab)
	}
	for i, r := range rows {
		if err := r.check(); err != nil {
			return fmt.Errorf("sample row %d: %w", i, err)
		}
	}
	return nil
}

func (r SampleRow) check() error {
	switch {
	case !r.Greedy && !(r.Temperature > 0 && !math.IsInf(r.Temperature, 0)):
		return fmt.Errorf("%w: temperature %g, want a finite value > 0 (or Greedy)", ErrArg, r.Temperature)
	case r.TopK < 0:
		return fmt.Errorf("%w: top-k %d, want ≥ 0", ErrArg, r.TopK)
	case !(r.TopP >= 0 && r.TopP <= 1):
		return fmt.Errorf("%w: top-p %g, want 0 ≤ top-p ≤ 1", ErrArg, r.TopP)
	case !(r.MinP >= 0 && r.MinP <= 1):
		return fmt.Errorf("%w: min-p %g, want 0 ≤ min-p ≤ 1", ErrArg, r.MinP)
	case r.TopLogprobs < 0:
		return fmt.Errorf("%w: top log-probabilities %d, want ≥ 0", ErrArg, r.TopLogprobs)
	}
	return nil
}

// Philox4x32 is the Philox4x32-10 counter-based generator of Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), as
// Random123 and cuRAND define it: ten rounds over the counter ctr with
// the key bumped by the Weyl constants between rounds. It is the
// generator behind SampleUniform, computed the same way on every backend.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	const (
		m0, m1 = 0xD2511F53, 0xCD9E8D57
		w0, w1 = 0x9E3779B9, 0xBB67AE85
	)
	c, k := ctr, key
	for r := 0; r < 10; r++ {
		if r > 0 {
			k[0] += w0
			k[1] += w1
		}
		p0 := uint64(m0) * uint64(c[0])
		p1 := uint64(m1) * uint64(c[2])
		c = [4]uint32{
			uint32(p1>>32) ^ c[1] ^ k[0], uint32(p1),
			uint32(p0>>32) ^ c[3] ^ k[1], uint32(p0),
		}
	}
	return c
}

// SampleUniform is the uniform number in [0, 1) that SampleRow's token
// choice uses for (seed, step): Philox4x32-10 of the counter (step low,
// step high, 0, 0) under the key (seed low, seed high), its first two
// outputs x0, x1 taken as the 53-bit integer x0·2²¹ + ⌊x1/2¹¹⌋ and scaled
// by 2⁻⁵³.
func SampleUniform(seed, step uint64) float64 {
	x := Philox4x32([4]uint32{uint32(step), uint32(step >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
	return float64(uint64(x[0])<<21|uint64(x[1])>>11) * 0x1p-53
}
