package cpu

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/backend/backendtest"
)

// The conformance suite, on the default backend (assembly GEMM, all
// cores), on one goroutine, and on the pure-Go GEMM kernel.
func TestConformance(t *testing.T) {
	backendtest.Run(t, New(), backendtest.DefaultTolerance())
}

func TestConformanceSerial(t *testing.T) {
	backendtest.Run(t, New(WithWorkers(1)), backendtest.DefaultTolerance())
}

func TestConformanceGenericGemm(t *testing.T) {
	backendtest.Run(t, New(WithGenericGemm(), WithWorkers(3)), backendtest.DefaultTolerance())
}

func TestBuffersOfAnotherBackendAreRejected(t *testing.T) {
	a, b := New(), New()
	buf, err := a.Alloc(4)
	require.NoError(t, err)
	require.ErrorIs(t, b.Fill(buf, 1), backend.ErrBuffer)
	require.ErrorIs(t, b.Free(buf), backend.ErrBuffer)
}

func ExampleBackend_LinearForward() {
	be := New()
	// y = x·Wᵀ + b with x = [1 2], W = [[1 0], [1 1], [0 -1]], b = [0 0 10]:
	// y = [1, 3, 8].
	x, _ := be.Alloc(2)
	w, _ := be.Alloc(6)
	b, _ := be.Alloc(3)
	y, _ := be.Alloc(3)
	_ = be.Upload(x, 0, []float32{1, 2})
	_ = be.Upload(w, 0, []float32{1, 0, 1, 1, 0, -1})
	_ = be.Upload(b, 0, []float32{0, 0, 10})
	if err := be.LinearForward(backend.Linear{Rows: 1, In: 2, Out: 3}, y, x, w, b); err != nil {
		fmt.Println(err)
		return
	}
	out := make([]float32, 3)
	_ = be.Download(out, y, 0)
	fmt.Println(out)
	// Output: [1 3 8]
}
