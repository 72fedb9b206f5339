//go:build !amd64 || noasm

package gemm

func bestKernel() kernel { return genericKernel() }
