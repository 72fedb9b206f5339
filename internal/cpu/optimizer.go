package cpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

var _ backend.Optimizer = (*Backend)(nil)

// AdamW applies one AdamW step with backend.AdamWUpdate, split over the
// workers (the update is elementwise, so the split changes no bit).
func (be *Backend) AdamW(step backend.AdamWStep, param, grad, m, v backend.Buffer) error {
	k, err := step.Scalars()
	if err != nil {
		return err
	}
	vs, err := be.views("adamw", param, grad, m, v)
	if err != nil {
		return err
	}
	if param == nil || grad == nil || m == nil || v == nil {
		return fmt.Errorf("%w: adamw needs param, grad, m and v", backend.ErrBuffer)
	}
	if err := backend.CheckSameLen([]string{"adamw param", "adamw grad", "adamw m", "adamw v"}, param, grad, m, v); err != nil {
		return err
	}
	be.parallelFor(len(vs[0]), 1<<14, func(lo, hi int) {
		backend.AdamWUpdate(vs[0][lo:hi], vs[1][lo:hi], vs[2][lo:hi], vs[3][lo:hi], k)
	})
	return nil
}

// GradNorm is the L2 norm of the buffers together. The squares are
// summed in float64 over chunks of gradNormChunk values (in parallel),
// and the chunks' sums added in order, so the result depends neither on
// timing nor on the number of workers.
func (be *Backend) GradNorm(grads ...backend.Buffer) (float64, error) {
	vs, err := be.views("grad norm", grads...)
	if err != nil {
		return 0, err
	}
	var total float64
	for i, g := range vs {
		if grads[i] == nil {
			return 0, fmt.Errorf("%w: grad norm buffer %d is nil", backend.ErrBuffer, i)
		}
		nc := (len(g) + gradNormChunk - 1) / gradNormChunk
		parts := make([]float64, nc)
		be.parallelTasks(nc, func(_, c int) {
			var s float64
			for _, x := range g[c*gradNormChunk : min((c+1)*gradNormChunk, len(g))] {
				s += float64(x) * float64(x)
			}
			parts[c] = s
		})
		for _, s := range parts {
			total += s
		}
	}
	return math.Sqrt(total), nil
}

// gradNormChunk is the values per partial sum of GradNorm.
const gradNormChunk = 1 << 15

// Scale multiplies every element of x by alpha.
func (be *Backend) Scale(alpha float32, x backend.Buffer) error {
	d, err := be.view("scale", x)
	if err != nil {
		return err
	}
	if x == nil {
		return fmt.Errorf("%w: scale of a nil buffer", backend.ErrBuffer)
	}
	if math.IsNaN(float64(alpha)) || math.IsInf(float64(alpha), 0) {
		return fmt.Errorf("%w: scale factor %v", backend.ErrArg, alpha)
	}
	be.parallelFor(len(d), 1<<15, func(lo, hi int) {
		for i := range d[lo:hi] {
			d[lo+i] *= alpha
		}
	})
	return nil
}
