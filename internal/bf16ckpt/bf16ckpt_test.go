package bf16ckpt

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRound: to the nearest bfloat16, ties to even.
func TestRound(t *testing.T) {
	for _, tc := range []struct{ in, want uint32 }{
		{0x3f800000, 0x3f800000}, // 1: a bf16 value
		{0x3f808000, 0x3f800000}, // 1 + 2⁻⁸: a tie, to the even 1
		{0x3f818000, 0x3f820000}, // a tie, up to the even
		{0x3f808001, 0x3f810000}, // above the tie: up
		{0x3f807fff, 0x3f800000}, // below it: down
		{0xbf808001, 0xbf810000}, // the sign is kept
		{0x7f7fffff, 0x7f800000}, // the largest float32 rounds up to +Inf
	} {
		assert.Equal(t, tc.want, math.Float32bits(Round(math.Float32frombits(tc.in))), "%#08x", tc.in)
	}
}
