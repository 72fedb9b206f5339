package gpu_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// Try the GPU and fall back to another backend when this binary has no
// CUDA support or the machine has no GPU.
func ExampleNew() {
	var be backend.Backend
	g, err := gpu.New(context.Background(), gpu.WithPrecision(gpu.BF16))
	switch {
	case err == nil:
		defer g.Close()
		be = g
	case errors.Is(err, gpu.ErrNotCompiled), errors.Is(err, gpu.ErrNoDriver), errors.Is(err, gpu.ErrNoDevice):
		// be = cpu.New() in a program inside this module.
	default:
		fmt.Println("gpu:", err)
		return
	}
	fmt.Println(be != nil || err != nil)
	// Output: true
}
