package gpu

import (
	_ "embed"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

//go:embed testdata/bf16_golden.json
var bf16Golden []byte

// TestBF16MatchesTorch compares the conversion with torch 1.13's
// float32→bfloat16 (testdata/gen_bf16.py): ties to even, overflow to Inf,
// subnormals, signs and random bit patterns.
func TestBF16MatchesTorch(t *testing.T) {
	var cases []struct {
		F32  uint32 `json:"f32"`
		BF16 uint16 `json:"bf16"`
	}
	require.NoError(t, json.Unmarshal(bf16Golden, &cases))
	require.Greater(t, len(cases), 50)
	for _, c := range cases {
		f := math.Float32frombits(c.F32)
		require.Equal(t, c.BF16, bf16FromFloat32(f), "float32 bits %#08x (%g)", c.F32, f)
	}
}

func TestBF16ByHand(t *testing.T) {
	cases := []struct {
		name string
		in   float32
		want float32
	}{
		// bf16 keeps 8 significant bits: 1 + 2^-8 is halfway between 1 and
		// 1 + 2^-7 and rounds to the even one, 1.
		{"tie to even down", 1 + 1.0/256, 1},
		// 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
		{"tie to even up", 1 + 3.0/256, 1 + 1.0/64},
		{"just above tie", 1 + 1.0/256 + 1.0/65536, 1 + 1.0/128},
		{"exact", -2.5, -2.5},
		{"inf", float32(math.Inf(1)), float32(math.Inf(1))},
		// The largest float32 is above the largest bf16 (0x7f7f) by more
		// than half an ulp of bf16: it overflows to +Inf.
		{"overflow", math.MaxFloat32, float32(math.Inf(1))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, roundBF16(c.in))
		})
	}
	nan := roundBF16(float32(math.NaN()))
	require.True(t, nan != nan, "NaN must stay NaN")
	// A NaN whose payload sits only in the low 16 bits must not become Inf.
	low := math.Float32frombits(0x7f800001)
	require.True(t, roundBF16(low) != roundBF16(low))
	// Widening is exact: every bf16 round-trips.
	for h := range uint32(1 << 16) {
		f := bf16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		require.Equal(t, uint16(h), bf16FromFloat32(f))
	}
}
