package cpu

import (
	"fmt"
	"math"

	"github.com/agentrl/agentrl/policy/backend"
)

var _ backend.Initializer = (*Backend)(nil)

// RandNormal sets b[i] = float32(std·backend.NormalAt(seed, i)).
func (be *Backend) RandNormal(b backend.Buffer, seed uint64, std float32) error {
	d, err := be.view("rand normal", b)
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("%w: rand normal of a nil buffer", backend.ErrBuffer)
	}
	if math.IsNaN(float64(std)) || math.IsInf(float64(std), 0) {
		return fmt.Errorf("%w: rand normal std %v", backend.ErrArg, std)
	}
	s := float64(std)
	be.parallelFor(len(d), 1<<14, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d[i] = float32(s * backend.NormalAt(seed, uint64(i)))
		}
	})
	return nil
}
