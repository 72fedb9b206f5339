package gpu

import "math"

// bf16FromFloat32 rounds f to bfloat16 (the upper 16 bits of a float32)
// to nearest, ties to even, as torch's float32→bfloat16 conversion
// (c10/util/BFloat16.h round_to_nearest_even) and CUDA's
// __float2bfloat16_rn; NaN stays a quiet NaN of the same sign.
func bf16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// bf16ToFloat32 widens a bfloat16 exactly.
func bf16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// roundBF16 is f rounded to the nearest bfloat16, as a float32: the value a
// BF16-precision GEMM multiplies.
func roundBF16(f float32) float32 { return bf16ToFloat32(bf16FromFloat32(f)) }
