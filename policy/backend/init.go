package backend

import "math"

// Initializer is implemented by backends that draw random values in their
// own memory, so that a large model's initial weights are made where they
// live and never cross from the host (a Qwen3-4B is 16 GB of float32).
// Both of this project's backends implement it.
type Initializer interface {
	// RandNormal sets every element i of b to float32(std·NormalAt(seed,
	// i)): the same values on every backend, up to the last bit of the
	// float64 logarithm and cosine each uses. std must be finite.
	RandNormal(b Buffer, seed uint64, std float32) error
}

// splitmix64 is the output function of Steele, Lea and Flood's SplitMix64
// (Java's SplittableRandom, Vigna's splitmix64.c) applied to z.
func splitmix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// golden is SplitMix64's increment, 2^64/φ.
const golden = 0x9e3779b97f4a7c15

// NormalAt returns the i-th draw of the standard normal stream seed. It is
// counter-based, so any element can be computed on its own (one GPU thread
// per element): SplitMix64's outputs number 2i+1 and 2i+2 from state seed,
//
//	a = mix(seed + (2i+1)·γ),  b = mix(seed + (2i+2)·γ),
//
// become u1 = (⌊a/2^11⌋ + 1)·2^−53 ∈ (0, 1] and u2 = ⌊b/2^11⌋·2^−53 ∈
// [0, 1), and the Box–Muller transform gives √(−2 ln u1)·cos(2π u2), in
// float64. kernels.cu's rand_normal computes the same expression.
func NormalAt(seed, i uint64) float64 {
	a := splitmix64(seed + (2*i+1)*golden)
	b := splitmix64(seed + (2*i+2)*golden)
	u1 := float64((a>>11)+1) * 0x1p-53
	u2 := float64(b>>11) * 0x1p-53
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// StreamSeed derives the seed of stream k (a model's k-th tensor) from a
// base seed: distinct k give unrelated streams.
func StreamSeed(seed uint64, k int) uint64 {
	return splitmix64(seed ^ splitmix64(uint64(k)+golden))
}
