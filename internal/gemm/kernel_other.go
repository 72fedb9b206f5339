//go:build !amd64 || noasm

package gemm

// bestKernel is the generic kernel: there is no assembly for this
// architecture or build.
func bestKernel() kernel { return genericKernel() }

// avx2Kernel reports that this build has no AVX2 kernel.
func avx2Kernel() (kernel, bool) { return kernel{}, false }

// avx512Kernel reports that this build has no AVX-512 kernel.
func avx512Kernel() (kernel, bool) { return kernel{}, false }
