package dataset

import (
	"errors"
	"fmt"
	"math/bits"
)

// The permutation of an epoch is fixed by this algorithm, written out here
// so that any implementation (and any platform or Go release: it uses only
// uint64 arithmetic, no math/rand) gives the same order for the same seed:
//
//  1. The generator is SplitMix64 (Steele, Lea, Flood 2014; the reference
//     is Vigna's splitmix64.c): state += 0x9E3779B97F4A7C15, output
//     mix64(state), where mix64(z) = z ^= z>>30; z *= 0xBF58476D1CE4E5B9;
//     z ^= z>>27; z *= 0x94D049BB133111EB; z ^= z>>31.
//  2. Epoch e starts the generator at state seed XOR mix64(e); mix64(0) = 0,
//     so epoch 0 is plain SplitMix64 seeded with seed.
//  3. A uniform integer below b comes from Lemire's multiply-shift with
//     rejection ("Fast Random Integer Generation in an Interval", 2019): x
//     the next output, (hi, lo) = the 128-bit product x*b; while lo <
//     (2^64 - b) mod b draw again; the result is hi.
//  4. The order is a Fisher–Yates (Durstenfeld) shuffle of 0..n-1: for i
//     from n-1 down to 1, j = uniform below i+1, swap positions i and j.
//
// testdata/gen_permutation.py is an independent Python implementation that
// produced the golden orders in testdata/permutations.json.

const splitmixGamma = 0x9E3779B97F4A7C15

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

type splitMix64 struct{ state uint64 }

func (s *splitMix64) next() uint64 {
	s.state += splitmixGamma
	return mix64(s.state)
}

// below returns a uniform integer in [0, b), b > 0.
func (s *splitMix64) below(b uint64) uint64 {
	hi, lo := bits.Mul64(s.next(), b)
	if lo < b {
		thresh := -b % b
		for lo < thresh {
			hi, lo = bits.Mul64(s.next(), b)
		}
	}
	return hi
}

// Permutation returns epoch's order of 0..n-1 for seed, by the algorithm
// documented above.
func Permutation(n int, seed uint64, epoch int) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	rng := splitMix64{state: seed ^ mix64(uint64(epoch))}
	for i := n - 1; i > 0; i-- {
		j := int(rng.below(uint64(i) + 1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// SamplerConfig configures a Sampler. BatchSize is required: the batch
// size has no default. The other zero fields are meaningful and are torch
// DataLoader's defaults: every epoch in order (Seed only matters with
// Shuffle), the last partial batch kept. verl's training dataloader
// shuffles (data.shuffle, default true) and drops the last partial batch;
// set Shuffle and DropLast for its behaviour, as the trainers do.
type SamplerConfig struct {
	// BatchSize is the number of prompts per batch (verl's
	// data.train_batch_size), > 0.
	BatchSize int
	// Seed fixes the order of every epoch (verl's data.seed).
	Seed uint64
	// Shuffle permutes each epoch; without it every epoch is 0..n-1.
	Shuffle bool
	// DropLast skips an epoch's last batch when it would be short.
	// Without it the last batch of an epoch holds the remainder; batches
	// never span two epochs.
	DropLast bool
}

// SamplerState is a sampler's position, enough to resume exactly: epoch
// Epoch's order (fixed by Seed) with its first Offset entries consumed. It
// marshals to JSON as {"seed":…,"epoch":…,"offset":…}.
type SamplerState struct {
	Seed   uint64 `json:"seed"`
	Epoch  int    `json:"epoch"`
	Offset int    `json:"offset"`
}

// ErrBadSamplerState is returned by Restore for a state that does not fit
// the data set.
var ErrBadSamplerState = errors.New("dataset: bad sampler state")

// Sampler yields batches of example indices, epoch after epoch, in a
// deterministic order that can be saved (State) and resumed (Restore) at any
// point: a resumed sampler yields exactly the batches the original would
// have. It is not safe for concurrent use.
type Sampler struct {
	n         int
	cfg       SamplerConfig
	st        SamplerState
	perm      []int
	permEpoch int
}

// NewSampler makes a sampler over n examples, starting at epoch 0.
func NewSampler(n int, cfg SamplerConfig) (*Sampler, error) {
	switch {
	case n <= 0:
		return nil, fmt.Errorf("dataset: sampler over %d examples", n)
	case cfg.BatchSize <= 0:
		return nil, fmt.Errorf("dataset: batch size %d", cfg.BatchSize)
	case cfg.DropLast && cfg.BatchSize > n:
		return nil, fmt.Errorf("dataset: batch size %d > %d examples with DropLast: no batch would ever be full", cfg.BatchSize, n)
	}
	return &Sampler{n: n, cfg: cfg, st: SamplerState{Seed: cfg.Seed}, permEpoch: -1}, nil
}

// BatchesPerEpoch is the number of batches Next yields per epoch (verl's
// len(train_dataloader)).
func (s *Sampler) BatchesPerEpoch() int {
	if s.cfg.DropLast {
		return s.n / s.cfg.BatchSize
	}
	return (s.n + s.cfg.BatchSize - 1) / s.cfg.BatchSize
}

// State returns the position to save in a checkpoint.
func (s *Sampler) State() SamplerState { return s.st }

// Restore moves the sampler to a saved position. The state's seed replaces
// the configured one, so that a checkpoint resumes its own order.
func (s *Sampler) Restore(st SamplerState) error {
	if st.Epoch < 0 || st.Offset < 0 || st.Offset > s.n {
		return fmt.Errorf("%w: epoch %d offset %d for %d examples", ErrBadSamplerState, st.Epoch, st.Offset, s.n)
	}
	s.st = st
	s.permEpoch = -1
	s.normalize()
	return nil
}

// Next returns the next batch: a fresh slice of indices into the data set,
// BatchSize long except for an epoch's last batch when DropLast is off.
func (s *Sampler) Next() []int {
	s.normalize()
	order := s.order()
	end := min(s.st.Offset+s.cfg.BatchSize, s.n)
	batch := append([]int(nil), order[s.st.Offset:end]...)
	s.st.Offset = end
	s.normalize()
	return batch
}

// normalize moves to the next epoch when the current one has no batch left.
func (s *Sampler) normalize() {
	left := s.n - s.st.Offset
	if left <= 0 || s.cfg.DropLast && left < s.cfg.BatchSize {
		s.st.Epoch++
		s.st.Offset = 0
	}
}

func (s *Sampler) order() []int {
	if s.permEpoch == s.st.Epoch {
		return s.perm
	}
	if s.cfg.Shuffle {
		s.perm = Permutation(s.n, s.st.Seed, s.st.Epoch)
	} else if s.perm == nil {
		s.perm = make([]int, s.n)
		for i := range s.perm {
			s.perm[i] = i
		}
	}
	s.permEpoch = s.st.Epoch
	return s.perm
}

// Gather returns items[idx[0]], items[idx[1]], ... — the batch a Sampler's
// indices name — or an error for an index out of range.
func Gather[T any](items []T, idx []int) ([]T, error) {
	out := make([]T, len(idx))
	for i, j := range idx {
		if j < 0 || j >= len(items) {
			return nil, fmt.Errorf("dataset: index %d at batch position %d out of range [0, %d)", j, i, len(items))
		}
		out[i] = items[j]
	}
	return out, nil
}
