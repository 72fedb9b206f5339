package dataset

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitMix64KnownValues(t *testing.T) {
	// SplitMix64 seeded with 0 starts 0xE220A8397B1DCDAF (the value commonly
	// quoted for Vigna's splitmix64.c); the next two are from
	// testdata/gen_permutation.py's independent implementation.
	r := splitMix64{}
	assert.Equal(t, uint64(0xE220A8397B1DCDAF), r.next())
	assert.Equal(t, uint64(0x6E789E6AA1B965F4), r.next())
	assert.Equal(t, uint64(0x06C45D188009454F), r.next())
	assert.Equal(t, uint64(0), mix64(0))
}

func TestPermutationGolden(t *testing.T) {
	// testdata/permutations.json: from testdata/gen_permutation.py, an
	// independent Python implementation of the documented algorithm.
	raw, err := os.ReadFile("testdata/permutations.json")
	require.NoError(t, err)
	var golden struct {
		SplitMix64Seed0 []uint64 `json:"splitmix64_seed0"`
		Cases           []struct {
			N     int    `json:"n"`
			Seed  uint64 `json:"seed"`
			Epoch int    `json:"epoch"`
			Perm  []int  `json:"perm"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(raw, &golden))
	r := splitMix64{}
	for _, want := range golden.SplitMix64Seed0 {
		assert.Equal(t, want, r.next())
	}
	require.Len(t, golden.Cases, 10)
	for _, c := range golden.Cases {
		assert.Equal(t, c.Perm, Permutation(c.N, c.Seed, c.Epoch), "n=%d seed=%d epoch=%d", c.N, c.Seed, c.Epoch)
	}
}

func TestPermutationIsPermutation(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 17, 1000} {
		p := Permutation(n, 99, 5)
		sorted := slices.Clone(p)
		slices.Sort(sorted)
		for i := range sorted {
			require.Equal(t, i, sorted[i])
		}
	}
	assert.NotEqual(t, Permutation(50, 1, 0), Permutation(50, 1, 1), "epochs differ")
	assert.NotEqual(t, Permutation(50, 1, 0), Permutation(50, 2, 0), "seeds differ")
}

func TestBelowIsUniform(t *testing.T) {
	// Lemire's method is exactly uniform; a chi-square check over 3 buckets
	// (where a plain modulo of a biased source would also pass, so this
	// guards only against gross mistakes such as an off-by-one bound).
	r := splitMix64{state: 7}
	var counts [3]int
	const draws = 30000
	for range draws {
		v := r.below(3)
		require.Less(t, v, uint64(3))
		counts[v]++
	}
	chi2 := 0.0
	for _, c := range counts {
		d := float64(c) - draws/3.0
		chi2 += d * d / (draws / 3.0)
	}
	assert.Less(t, chi2, 13.8, "chi-square with 2 degrees of freedom, p = 0.001") // counts %v
}

func collect(s *Sampler, batches int) [][]int {
	out := make([][]int, batches)
	for i := range out {
		out[i] = s.Next()
	}
	return out
}

func TestSamplerBatchesAndEpochs(t *testing.T) {
	// 10 examples, batches of 4, no shuffle: by hand,
	// keep last:  [0 1 2 3] [4 5 6 7] [8 9] | [0 1 2 3] ...
	// drop last:  [0 1 2 3] [4 5 6 7] | [0 1 2 3] [4 5 6 7] | ...
	s, err := NewSampler(10, SamplerConfig{BatchSize: 4})
	require.NoError(t, err)
	assert.Equal(t, 3, s.BatchesPerEpoch())
	assert.Equal(t, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}, {0, 1, 2, 3}}, collect(s, 4))
	assert.Equal(t, SamplerState{Epoch: 1, Offset: 4}, s.State())

	s, err = NewSampler(10, SamplerConfig{BatchSize: 4, DropLast: true})
	require.NoError(t, err)
	assert.Equal(t, 2, s.BatchesPerEpoch())
	assert.Equal(t, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 2, 3}}, collect(s, 3))
	assert.Equal(t, SamplerState{Epoch: 1, Offset: 4}, s.State())

	// Shuffled: each epoch's batches are that epoch's Permutation, cut in order.
	s, err = NewSampler(10, SamplerConfig{BatchSize: 4, Seed: 42, Shuffle: true})
	require.NoError(t, err)
	var got []int
	for _, b := range collect(s, 6) {
		got = append(got, b...)
	}
	want := append(Permutation(10, 42, 0), Permutation(10, 42, 1)...)
	assert.Equal(t, want, got)
	assert.Equal(t, SamplerState{Seed: 42, Epoch: 2, Offset: 0}, s.State())
}

// Stopping at any position, saving the state through JSON, and resuming in
// a fresh sampler gives exactly the sequence an uninterrupted sampler gives.
func TestSamplerResumeAnywhere(t *testing.T) {
	for _, cfg := range []SamplerConfig{
		{BatchSize: 3, Seed: 7, Shuffle: true},
		{BatchSize: 3, Seed: 7, Shuffle: true, DropLast: true},
		{BatchSize: 11, Seed: 1 << 63, Shuffle: true},
		{BatchSize: 4},
	} {
		const n, total = 11, 20
		ref, err := NewSampler(n, cfg)
		require.NoError(t, err)
		all := collect(ref, total)
		for stop := 0; stop <= total; stop++ {
			s, err := NewSampler(n, cfg)
			require.NoError(t, err)
			prefix := collect(s, stop)
			blob, err := json.Marshal(s.State())
			require.NoError(t, err)

			var st SamplerState
			require.NoError(t, json.Unmarshal(blob, &st))
			resumed, err := NewSampler(n, SamplerConfig{BatchSize: cfg.BatchSize, Shuffle: cfg.Shuffle, DropLast: cfg.DropLast}) // seed comes from the state
			require.NoError(t, err)
			require.NoError(t, resumed.Restore(st))
			rest := collect(resumed, total-stop)
			assert.Equal(t, all, append(prefix, rest...), "cfg %+v stop %d", cfg, stop)
		}
	}
}

func TestSamplerStateJSON(t *testing.T) {
	blob, err := json.Marshal(SamplerState{Seed: 18446744073709551615, Epoch: 3, Offset: 128})
	require.NoError(t, err)
	assert.JSONEq(t, `{"seed": 18446744073709551615, "epoch": 3, "offset": 128}`, string(blob))
}

func TestSamplerRestoreMidBatchOffset(t *testing.T) {
	// A state need not sit on a batch boundary: offset 5 of epoch 0 resumes
	// with positions 5..7 of epoch 0's order.
	s, err := NewSampler(10, SamplerConfig{BatchSize: 3, Seed: 3, Shuffle: true})
	require.NoError(t, err)
	require.NoError(t, s.Restore(SamplerState{Seed: 3, Epoch: 0, Offset: 5}))
	assert.Equal(t, Permutation(10, 3, 0)[5:8], s.Next())
	// Offset n means "epoch done": the next batch opens epoch 1.
	require.NoError(t, s.Restore(SamplerState{Seed: 3, Epoch: 0, Offset: 10}))
	assert.Equal(t, SamplerState{Seed: 3, Epoch: 1, Offset: 0}, s.State())
	assert.Equal(t, Permutation(10, 3, 1)[:3], s.Next())
}

func TestSamplerErrors(t *testing.T) {
	_, err := NewSampler(0, SamplerConfig{BatchSize: 1})
	assert.Error(t, err)
	_, err = NewSampler(5, SamplerConfig{})
	assert.Error(t, err)
	_, err = NewSampler(5, SamplerConfig{BatchSize: 6, DropLast: true})
	assert.ErrorContains(t, err, "no batch would ever be full")
	s, err := NewSampler(5, SamplerConfig{BatchSize: 6}) // one short batch per epoch
	require.NoError(t, err)
	assert.Equal(t, [][]int{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}}, collect(s, 2))

	for _, st := range []SamplerState{{Epoch: -1}, {Offset: -1}, {Offset: 6}} {
		before := s.State()
		assert.ErrorIs(t, s.Restore(st), ErrBadSamplerState)
		assert.Equal(t, before, s.State(), "a rejected state changes nothing")
	}
}

func TestGather(t *testing.T) {
	items := []string{"a", "b", "c"}
	got, err := Gather(items, []int{2, 0, 2})
	require.NoError(t, err)
	assert.Equal(t, []string{"c", "a", "c"}, got)
	_, err = Gather(items, []int{0, 3})
	assert.ErrorContains(t, err, "index 3 at batch position 1 out of range [0, 3)")
	_, err = Gather(items, []int{-1})
	assert.Error(t, err)
}
