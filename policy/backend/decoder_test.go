package backend

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Known-answer vectors of Philox4x32-10 from Random123's
// tests/kat_vectors ("philox4x32 10 ctr0..3 key0..1 out0..3").
func TestPhiloxKnownAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{"zero", [4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{"ones", [4]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, [2]uint32{^uint32(0), ^uint32(0)}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{"pi", [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	} {
		t.Run(c.name, func(t *testing.T) { require.Equal(t, c.want, Philox4x32(c.ctr, c.key)) })
	}
}

func TestSampleUniform(t *testing.T) {
	// By the definition: seed 0, step 0 is the "zero" vector above,
	// (0x6627e8d5·2²¹ + ⌊0xe169c58d/2¹¹⌋)·2⁻⁵³.
	want := float64(uint64(0x6627e8d5)<<21|uint64(0xe169c58d)>>11) * 0x1p-53
	require.Equal(t, want, SampleUniform(0, 0))
	// n draws over steps: the mean of U(0,1) is 1/2 with standard error
	// 1/√(12n); 6 standard errors bound a correct generator's miss with
	// probability 2e-9. Every value lies in [0, 1).
	const n = 100000
	var sum float64
	seen := map[float64]bool{}
	for i := range uint64(n) {
		u := SampleUniform(0x1234_5678_9abc, i)
		require.True(t, u >= 0 && u < 1, "u = %v", u)
		sum += u
		seen[u] = true
	}
	require.InDelta(t, 0.5, sum/n, 6/math.Sqrt(12*n))
	require.Len(t, seen, n, "distinct counters give distinct numbers")
	require.NotEqual(t, SampleUniform(1, 5), SampleUniform(2, 5), "the seed is the key")
	require.NotEqual(t, SampleUniform(1<<32, 5), SampleUniform(1, 5), "both halves of the seed count")
	require.NotEqual(t, SampleUniform(1, 1<<32), SampleUniform(1, 0), "both halves of the step count")
}

func TestCheckPagedStep(t *testing.T) {
	spec := KVCacheSpec{Layers: 2, KVHeads: 2, HeadDim: 4, BlockSize: 4, Blocks: 8}
	good := PagedStep{Rows: 5, Seqs: []PagedSeq{
		{Q0: 0, QLen: 3, KLen: 3, Blocks: []int32{5}},       // prefill of 3: positions 0..2 in block 5
		{Q0: 3, QLen: 1, KLen: 6, Blocks: []int32{1, 2}},    // decode: position 5 → block 2 row 1
		{Q0: 5, QLen: 0, KLen: 4, Blocks: []int32{7}},       // nothing new
		{Q0: 4, QLen: 1, KLen: 9, Blocks: []int32{0, 3, 4}}, // position 8 → block 4 row 0
	}}
	slots, err := CheckPagedStep(spec, good)
	require.NoError(t, err)
	require.Equal(t, []int32{20, 21, 22, 2*4 + 1, 4 * 4}, slots)

	row := PagedStep{Rows: 3, Seqs: []PagedSeq{{Q0: 0, QLen: 2, KLen: 2, Blocks: []int32{0}}}}
	s, err := CheckPagedStep(spec, row)
	require.NoError(t, err)
	require.Equal(t, []int32{0, 1, -1}, s, "a row in no sequence has no slot")

	for _, c := range []struct {
		name string
		spec KVCacheSpec
		step PagedStep
		want error
	}{
		{"bad spec", KVCacheSpec{Layers: 1, KVHeads: 1, HeadDim: 1, BlockSize: 0, Blocks: 1}, good, ErrShape},
		{"negative rows", spec, PagedStep{Rows: -1}, ErrShape},
		{"rows past the end", spec, PagedStep{Rows: 2, Seqs: []PagedSeq{{Q0: 1, QLen: 2, KLen: 2, Blocks: []int32{0}}}}, ErrShape},
		{"more queries than keys", spec, PagedStep{Rows: 2, Seqs: []PagedSeq{{Q0: 0, QLen: 2, KLen: 1, Blocks: []int32{0}}}}, ErrShape},
		{"short table", spec, PagedStep{Rows: 1, Seqs: []PagedSeq{{Q0: 0, QLen: 1, KLen: 5, Blocks: []int32{0}}}}, ErrShape},
		{"block out of range", spec, PagedStep{Rows: 1, Seqs: []PagedSeq{{Q0: 0, QLen: 1, KLen: 1, Blocks: []int32{8}}}}, ErrIndex},
		{"overlapping rows", spec, PagedStep{Rows: 2, Seqs: []PagedSeq{{Q0: 0, QLen: 2, KLen: 2, Blocks: []int32{0}}, {Q0: 1, QLen: 1, KLen: 1, Blocks: []int32{1}}}}, ErrShape},
		{"one slot twice", spec, PagedStep{Rows: 2, Seqs: []PagedSeq{{Q0: 0, QLen: 1, KLen: 2, Blocks: []int32{3}}, {Q0: 1, QLen: 1, KLen: 2, Blocks: []int32{3}}}}, ErrIndex},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckPagedStep(c.spec, c.step)
			require.ErrorIs(t, err, c.want)
		})
	}
}

func TestCheckBlockCopyAndSampleRows(t *testing.T) {
	spec := KVCacheSpec{Layers: 1, KVHeads: 1, HeadDim: 1, BlockSize: 2, Blocks: 4}
	require.NoError(t, CheckBlockCopy(spec, []int32{0, 1}, []int32{2, 3}))
	require.ErrorIs(t, CheckBlockCopy(spec, []int32{0}, []int32{1, 2}), ErrShape)
	require.ErrorIs(t, CheckBlockCopy(spec, []int32{0}, []int32{4}), ErrIndex)
	require.ErrorIs(t, CheckBlockCopy(spec, []int32{0, 1}, []int32{2, 2}), ErrIndex)
	require.ErrorIs(t, CheckBlockCopy(spec, []int32{0, 2}, []int32{2, 3}), ErrIndex, "block 2 read and written")

	buf := fakeBuf(6)
	res := make([]SampleResult, 2)
	require.NoError(t, CheckSampleRows(buf, 3, []SampleRow{{Greedy: true}, {Temperature: 0.5, TopK: 2, TopP: 0.9, MinP: 0.1}}, res))
	for _, c := range []struct {
		name   string
		logits Buffer
		vocab  int
		rows   []SampleRow
		out    []SampleResult
		want   error
	}{
		{"vocab", buf, 0, nil, nil, ErrShape},
		{"results", buf, 3, []SampleRow{{Greedy: true}}, res, ErrShape},
		{"nil logits", nil, 3, []SampleRow{{Greedy: true}}, res[:1], ErrBuffer},
		{"short logits", buf, 4, []SampleRow{{Greedy: true}, {Greedy: true}}, res, ErrShape},
		{"temperature", buf, 3, []SampleRow{{Temperature: 0}}, res[:1], ErrArg},
		{"infinite temperature", buf, 3, []SampleRow{{Temperature: math.Inf(1)}}, res[:1], ErrArg},
		{"top-k", buf, 3, []SampleRow{{Greedy: true, TopK: -1}}, res[:1], ErrArg},
		{"top-p", buf, 3, []SampleRow{{Temperature: 1, TopP: 1.5}}, res[:1], ErrArg},
		{"min-p", buf, 3, []SampleRow{{Temperature: 1, MinP: math.NaN()}}, res[:1], ErrArg},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, CheckSampleRows(c.logits, c.vocab, c.rows, c.out), c.want)
		})
	}
}

type fakeBuf int

func (b fakeBuf) Len() int { return int(b) }
