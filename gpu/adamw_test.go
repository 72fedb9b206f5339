package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
)

// adamwKernelHost is kernels.cu's adamw kernel written in Go, operation for
// operation (every product, quotient and root rounded to float32, no fused
// multiply-add), so that the order of its operations can be checked
// against the reference update without a GPU.
func adamwKernelHost(p, g, m, v []float32, k backend.AdamWScalars) {
	for i := range p {
		x := p[i]
		if k.UseDecay {
			x = x * k.Decay
		}
		mj := float32(m[i]*k.B1) + float32(g[i]*k.OB1)
		vj := float32(v[i]*k.B2) + float32(float32(k.OB2*g[i])*g[i])
		denom := float32(float32(math.Sqrt(float64(vj)))/k.BC2Sqrt) + k.Eps
		p[i] = x + float32(k.NegStep*float32(mj/denom))
		m[i], v[i] = mj, vj
	}
}

// TestAdamWKernelArithmetic runs three steps of backend.AdamWUpdate (the
// reference every backend's optimizer reproduces, checked against torch in
// package policy) and of the kernel's arithmetic with the same scalars:
// parameters and moments must agree bit for bit.
func TestAdamWKernelArithmetic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 257
	ref, grad := make([]float32, n), make([]float32, n)
	for i := range ref {
		ref[i] = float32(rng.NormFloat64())
	}
	mine := append([]float32(nil), ref...)
	rm, rv, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for step := int64(1); step <= 3; step++ {
		for i := range grad {
			grad[i] = float32(rng.NormFloat64() * 0.1)
		}
		k, err := AdamWStep{LR: 3e-4 * float64(step), Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: step}.Scalars()
		require.NoError(t, err)
		backend.AdamWUpdate(ref, grad, rm, rv, k)
		adamwKernelHost(mine, grad, m, v, k)
		for i := range ref {
			require.Equal(t, math.Float32bits(ref[i]), math.Float32bits(mine[i]), "step %d, element %d", step, i)
			require.Equal(t, math.Float32bits(rm[i]), math.Float32bits(m[i]), "m, step %d, element %d", step, i)
			require.Equal(t, math.Float32bits(rv[i]), math.Float32bits(v[i]), "v, step %d, element %d", step, i)
		}
	}
}
