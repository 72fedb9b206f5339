// Package gpu is the CUDA backend for the policy transformer, built on
// gorgonia.org/cu behind the build tag cuda. It implements the same backend
// interface as the CPU backend in package policy and passes the same
// conformance suite.
//
// Every file that imports gorgonia.org/cu carries //go:build cuda, because
// that package's init exits the process when no CUDA driver is present.
package gpu
