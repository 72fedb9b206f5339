// Package losstest holds checks for loss variants: gradients against
// central finite differences, invariance to padding tokens and zero
// policy gradient at zero advantage, which every objective must pass, and
// the REINFORCE gradient at ratio 1, which an objective passes if it
// declares loss.Variant.ReducesToREINFORCE. A new variant's tests call
// CheckAll (or Check, which returns the failures), as gonum's
// blas/testblas is called by each BLAS implementation.
//
// The checks run against an Evaluator (a *loss.Computer). Objectives that
// use StopGradient (gspo, cispo, the "+" KL estimators) report the gradient
// of a surrogate rather than of their value; CheckGradient differentiates
// that surrogate (loss.Computer.Surrogate) by finite differences, so it
// applies to them too.
//
// RandomBatch makes the batches the checks use; Rows writes and reads
// batches as plain [][]float32 slices, and Values reads a result's
// gradients the same way.
//
// losstest depends only on package loss, gorgonia.org/tensor (the Batch
// type) and the standard library, testing included.
package losstest
