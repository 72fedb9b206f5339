package gpu

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEmbeddingGroups(t *testing.T) {
	for _, c := range []struct {
		name string
		ids  []int32
		want []int32
		u    int
	}{
		{"none", nil, []int32{0}, 0},
		{"distinct", []int32{5, 2, 9}, []int32{5, 2, 9, 0, 1, 2, 3, 0, 1, 2}, 3},
		// ids 7, 3, 7, 7, 3: distinct 7 then 3; 7 at positions 0, 2, 3 and
		// 3 at 1, 4 — offsets 0, 3, 5.
		{"repeated", []int32{7, 3, 7, 7, 3}, []int32{7, 3, 0, 3, 5, 0, 2, 3, 1, 4}, 2},
		{"one id", []int32{4, 4, 4}, []int32{4, 0, 3, 0, 1, 2}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			grp, u := embeddingGroups(c.ids)
			assert.Equal(t, c.u, u)
			assert.Equal(t, c.want, grp)
		})
	}
}

// TestNoFloatAtomics: no kernel adds floats through atomics, whose order,
// and so whose bits, change from run to run (issue #35: the same seed
// gives the same weights). Integer atomics (histograms) are exact.
func TestNoFloatAtomics(t *testing.T) {
	for _, f := range []string{"kernels/kernels.cu", "kernels/decode.cu"} {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for i, line := range strings.Split(string(src), "\n") {
			if !strings.Contains(line, "atomicAdd(") || strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			assert.Regexp(t, `atomicAdd\(&\w+\[[^\]]*\], (1u|sr_fx\()`, line, "%s:%d adds through an atomic that may not be exact", f, i+1)
		}
	}
}
