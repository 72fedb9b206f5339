// Package internal and its subpackages hold code that users of agentrl must
// not import: CPU kernels, numerics helpers and the atomic file writer
// shared by the public packages, and what several packages' tests share
// (bf16ckpt).
package internal
