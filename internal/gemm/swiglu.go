package gemm

// Sigmoid is 1/(1 + e^−x) through Exp32, the logistic function of SiLU
// (silu(x) = x·σ(x), "Sigmoid-Weighted Linear Units", Elfwing et al.,
// arXiv:1702.03118).
func Sigmoid(x float32) float32 { return 1 / (1 + Exp32(-x)) }

// SwiGLU sets out[i] = silu(gate[i])·up[i] = (gate[i]·σ(gate[i]))·up[i],
// the gated MLP activation of Shazeer's "GLU Variants Improve
// Transformer" (arXiv:2002.05202) as Qwen and Llama use it. Each element
// is the same chain of float32 operations (each rounded on its own)
// whichever kernel computes it, so the result does not depend on where a
// slice starts or how long it is. The slices have equal lengths.
func (e *Engine) SwiGLU(out, gate, up []float32) { e.kern.swiglu(out, gate, up) }

// SwiGLUGrad accumulates the gradients of SwiGLU: with s = σ(g),
// dgate[i] += ((dout[i]·up[i])·s)·(1 + g·(1 − s)) (the derivative of
// g·σ(g) is σ(g)·(1 + g·(1 − σ(g)))) and dup[i] += (dout[i]·g)·s. A nil
// dgate or dup is skipped. Bits as in SwiGLU: the same whatever the
// kernel and the slicing.
func (e *Engine) SwiGLUGrad(dgate, dup, dout, gate, up []float32) {
	e.kern.swigluGrad(dgate, dup, dout, gate, up)
}

func swigluGeneric(out, gate, up []float32) {
	up = up[:len(out)]
	gate = gate[:len(out)]
	for i, g := range gate {
		out[i] = g * Sigmoid(g) * up[i]
	}
}

func swigluGradGeneric(dgate, dup, dout, gate, up []float32) {
	gate, up = gate[:len(dout)], up[:len(dout)]
	for i, g := range gate {
		sg := Sigmoid(g)
		if dgate != nil {
			dgate[i] += dout[i] * up[i] * sg * (1 + g*(1-sg))
		}
		if dup != nil {
			dup[i] += dout[i] * g * sg
		}
	}
}
