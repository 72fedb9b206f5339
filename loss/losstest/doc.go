// Package losstest holds checks that any loss variant must pass: gradients
// against central finite differences, invariance to padding tokens, zero
// policy gradient at zero advantage, and the REINFORCE gradient at ratio 1
// without clipping. A new variant's tests call them, as gonum's
// blas/testblas is called by each BLAS implementation.
package losstest
