package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy"
)

// adamwKernelHost is kernels.cu's adamw kernel written in Go, operation for
// operation (every product, quotient and root rounded to float32, no fused
// multiply-add), so that the scalars and the order of operations can be
// checked against policy.AdamW without a GPU.
func adamwKernelHost(p, g, m, v []float32, k adamScalars) {
	for i := range p {
		x := p[i]
		if k.useDecay {
			x = x * k.decay
		}
		mj := float32(m[i]*k.b1) + float32(g[i]*k.ob1)
		vj := float32(v[i]*k.b2) + float32(float32(k.ob2*g[i])*g[i])
		denom := float32(float32(math.Sqrt(float64(vj)))/k.bc2Sqrt) + k.eps
		p[i] = x + float32(k.negStep*float32(mj/denom))
		m[i], v[i] = mj, vj
	}
}

// TestAdamWScalarsMatchPolicy runs three steps of policy.AdamW (checked
// against torch in package policy) and of the kernel's arithmetic with
// AdamWStep's scalars: the parameters must agree bit for bit.
func TestAdamWScalarsMatchPolicy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 257
	data := make([]float32, n)
	grad := make([]float32, n)
	for i := range data {
		data[i] = float32(rng.NormFloat64())
	}
	mine := append([]float32(nil), data...)
	m, v := make([]float32, n), make([]float32, n)
	cfg := policy.AdamWConfig{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	opt, err := policy.NewAdamW([]policy.Param{{Name: "w", Data: data, Grad: grad}}, cfg)
	require.NoError(t, err)
	for step := int64(1); step <= 3; step++ {
		for i := range grad {
			grad[i] = float32(rng.NormFloat64() * 0.1)
		}
		lr, err := opt.Step()
		require.NoError(t, err)
		k, err := AdamWStep{LR: lr, Beta1: cfg.Beta1, Beta2: cfg.Beta2, Eps: cfg.Eps, WeightDecay: cfg.WeightDecay, Step: step}.scalars()
		require.NoError(t, err)
		adamwKernelHost(mine, grad, m, v, k)
		for i := range data {
			require.Equal(t, math.Float32bits(data[i]), math.Float32bits(mine[i]), "step %d, element %d", step, i)
		}
	}
}

func TestAdamWScalarsByHand(t *testing.T) {
	// Step 1, β1 = 0.9, β2 = 0.999: bias corrections 1−0.9 = 0.1 and
	// 1−0.999 = 0.001, so negStep = −lr/0.1 = −0.01 for lr 1e-3 and
	// bc2Sqrt = √0.001; decay = 1 − 1e-3·0.01.
	k, err := AdamWStep{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1}.scalars()
	require.NoError(t, err)
	require.InDelta(t, -0.01, float64(k.negStep), 1e-9)
	require.InDelta(t, math.Sqrt(0.001), float64(k.bc2Sqrt), 1e-8)
	require.Equal(t, float32(1-1e-5), k.decay)
	require.True(t, k.useDecay)
	for name, s := range map[string]AdamWStep{
		"step 0":       {LR: 1e-3, Beta1: 0.9, Beta2: 0.999},
		"NaN lr":       {LR: math.NaN(), Beta1: 0.9, Beta2: 0.999, Step: 1},
		"beta1 = 1":    {LR: 1e-3, Beta1: 1, Beta2: 0.999, Step: 1},
		"beta2 < 0":    {LR: 1e-3, Beta1: 0.9, Beta2: -0.1, Step: 1},
		"negative eps": {LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: -1, Step: 1},
		"inf decay":    {LR: 1e-3, Beta1: 0.9, Beta2: 0.999, WeightDecay: math.Inf(1), Step: 1},
	} {
		_, err := s.scalars()
		require.Error(t, err, name)
	}
}
