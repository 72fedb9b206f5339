package safetensors

import (
	"fmt"
	"math"
)

// DType is a safetensors element type, spelled as in the header ("F32").
type DType string

// The element types the format defines with whole-byte sizes. Sub-byte
// types (F4, F6_E2M3, F6_E3M2) are rejected with ErrUnsupportedDType.
const (
	Bool    DType = "BOOL"
	U8      DType = "U8"
	I8      DType = "I8"
	F8E5M2  DType = "F8_E5M2"
	F8E4M3  DType = "F8_E4M3"
	F8E8M0  DType = "F8_E8M0"
	I16     DType = "I16"
	U16     DType = "U16"
	F16     DType = "F16"
	BF16    DType = "BF16"
	I32     DType = "I32"
	U32     DType = "U32"
	F32     DType = "F32"
	F64     DType = "F64"
	I64     DType = "I64"
	U64     DType = "U64"
	dtypeNA DType = ""
)

// dtypeSizes is the size in bytes of one element of each known dtype. It is
// an immutable table.
var dtypeSizes = map[DType]int{
	Bool: 1, U8: 1, I8: 1, F8E5M2: 1, F8E4M3: 1, F8E8M0: 1,
	I16: 2, U16: 2, F16: 2, BF16: 2,
	I32: 4, U32: 4, F32: 4,
	F64: 8, I64: 8, U64: 8,
}

// Size is the number of bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// Valid reports whether d is a dtype this package can read.
func (d DType) Valid() bool { return dtypeSizes[d] != 0 }

// IsFloat32Convertible reports whether elements of d convert to float32
// exactly (F32, F16, BF16).
func (d DType) IsFloat32Convertible() bool { return d == F32 || d == F16 || d == BF16 }

func parseDType(s string) (DType, error) {
	d := DType(s)
	if d.Valid() {
		return d, nil
	}
	switch s {
	case "F4", "F6_E2M3", "F6_E3M2":
		return dtypeNA, fmt.Errorf("%w: %q (sub-byte)", ErrUnsupportedDType, s)
	}
	return dtypeNA, fmt.Errorf("%w: %q", ErrUnsupportedDType, s)
}

// BF16ToFloat32 converts a bfloat16 bit pattern to float32. bfloat16 is the
// upper half of a float32, so the conversion is exact for every pattern.
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Float32ToBF16 rounds f to the nearest bfloat16, ties to even, exactly as
// torch does (c10/util/BFloat16.h, round_to_nearest_even): a NaN becomes the
// canonical quiet NaN 0x7FC0, values beyond the largest bfloat16 round to
// infinity.
func Float32ToBF16(f float32) uint16 {
	if f != f {
		return 0x7FC0
	}
	u := math.Float32bits(f)
	return uint16((u + 0x7FFF + (u>>16)&1) >> 16)
}

// F16ToFloat32 converts an IEEE 754 binary16 bit pattern to float32. Every
// half-precision value, subnormals included, is exactly representable; NaN
// payloads are kept.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	man := uint32(h & 0x3FF)
	switch exp {
	case 0:
		// Zero or subnormal: man × 2^-24, exact in float32.
		f := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | man<<13)
	default:
		// Rebias the exponent from 15 to 127.
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	}
}

// Float32ToF16 rounds f to the nearest IEEE 754 binary16, ties to even:
// overflow gives infinity, tiny values become subnormal or signed zero, and
// NaN stays NaN (quiet, with the top payload bits kept).
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xFF
	man := b & 0x7FFFFF
	if exp == 0xFF {
		if man != 0 {
			return sign | 0x7E00 | uint16(man>>13)
		}
		return sign | 0x7C00
	}
	e := exp - 127 + 15 // biased half exponent
	if e >= 0x1F {
		return sign | 0x7C00
	}
	if e <= 0 {
		// Result is subnormal (or rounds up to the smallest normal): the
		// value in units of 2^-24 is m × 2^(e-14) with m the 24-bit
		// significand, so shift right by 14-e.
		if e < -10 {
			return sign // below half the smallest subnormal
		}
		m := man | 0x800000
		return sign | uint16(shiftRNE(m, uint(14-e)))
	}
	// Normal: a carry out of the significand bumps the exponent, and from
	// the largest exponent it lands exactly on infinity's pattern.
	return sign | uint16(uint32(e)<<10+shiftRNE(man, 13))
}

// shiftRNE returns x >> s rounded to nearest, ties to even (1 ≤ s ≤ 31).
func shiftRNE(x uint32, s uint) uint32 {
	q := x >> s
	rem := x & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}
