package backend

// BF16Weights is implemented by backends that can hold a weight in
// bfloat16 only, 2 bytes a parameter, for a forward that multiplies in
// bf16 anyway: the weights of sharded training whose float32 master
// copy is split over the ranks (DeepSpeed's bf16 ZeRO; package policy's
// ShardOptions.BF16Weights). The GPU backend in BF16 precision
// implements it; the CPU backend, which computes in float32, does not.
//
// A bf16 buffer has Len elements like any Buffer. Upload rounds the
// float32 values to the nearest bfloat16 (ties to even, as torch's
// tensor.to(torch.bfloat16)), Download widens them exactly, Fill rounds
// its value, and Copy converts between a bf16 buffer and a float32 one
// in either direction (rounding, or widening) or copies between two
// bf16 buffers. The kernels accept one wherever they read a weight —
// LinearForward's and LinearBackward's w and bias, EmbeddingForward's
// table, RMSNormForward's and RMSNormBackward's w, LogProbEntropy's,
// LogProbEntropyBackward's and Logits' w — and compute exactly what they
// compute from a float32 buffer holding the same (bf16-rounded) values.
// Anywhere else (an output, a gradient, an activation, the optimizer's
// buffers) a bf16 buffer is an ErrBuffer error.
type BF16Weights interface {
	// AllocBF16 returns a zeroed bf16 buffer of n elements (n ≥ 0).
	AllocBF16(n int) (Buffer, error)
	// IsBF16 reports whether b is a bf16 buffer of this backend.
	IsBF16(b Buffer) bool
}
