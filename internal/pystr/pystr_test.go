package pystr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIsSpace checks every rune below U+3001 against the code points for
// which Python 3.11's chr(c).isspace() is true, listed by
// [c for c in range(0x3001) if chr(c).isspace()].
func TestIsSpace(t *testing.T) {
	want := map[rune]bool{}
	for _, r := range []rune{9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 133, 160, 5760, 8192, 8193, 8194, 8195, 8196, 8197,
		8198, 8199, 8200, 8201, 8202, 8232, 8233, 8239, 8287, 12288} {
		want[r] = true
	}
	for r := rune(0); r <= 0x3000; r++ {
		assert.Equal(t, want[r], IsSpace(r), "U+%04X", r)
	}
	assert.False(t, IsSpace(0x200b), "zero-width space is not white space")
}
