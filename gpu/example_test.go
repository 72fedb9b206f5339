package gpu_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/policy/backend"
)

// Try the GPU and fall back to the CPU backend when this binary has no
// CUDA support or the machine has no GPU. Package device does this
// behind the -device flag (device.Open), and describes its choice.
func ExampleNew() {
	var be backend.Backend
	g, err := gpu.New(context.Background(), gpu.WithPrecision(gpu.BF16))
	switch {
	case err == nil:
		defer g.Close()
		be = g
	case errors.Is(err, gpu.ErrNotCompiled), errors.Is(err, gpu.ErrNoDriver), errors.Is(err, gpu.ErrNoDevice):
		fmt.Fprintln(os.Stderr, "no GPU, running on the CPU:", err)
		be = device.NewCPU(0)
	default:
		fmt.Println("gpu:", err)
		return
	}
	fmt.Println(be != nil)
	// Output: true
}
