// Package backendtest is the conformance suite of policy/backend, exported
// like gonum's blas/testblas so that every Backend — internal/cpu, the
// CUDA backend in package gpu, or a user's own — runs the same checks from
// its tests:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, cpu.New(), backendtest.DefaultTolerance)
//	}
//
// Each kernel's forward is compared with a straightforward float64
// reference written here with naive loops (no code shared with any
// backend), and each backward with central finite differences of that
// float64 reference applied to the loss L = Σ w ⊙ out for random w. The
// backward is called on gradient buffers that already hold values, so the
// accumulation convention is checked too. Further checks cover the KV-cache
// decode path, vocabulary chunking, zero sizes and the errors of bad calls,
// and, for a backend that implements backend.Decoder, its paged KV cache
// against contiguous attention and its sampling against a naive float64
// reference of backend.SampleRow's rule (token for token, and by a
// chi-square test of the frequencies).
//
// backendtest may import policy/backend, testing and testify; it must not
// import any backend implementation (internal/cpu, gpu) or package policy.
package backendtest
