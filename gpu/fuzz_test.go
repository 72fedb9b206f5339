package gpu

import "testing"

// FuzzParsePTX: the PTX parser never panics and only reports entries named
// on .entry lines.
func FuzzParsePTX(f *testing.F) {
	f.Add(ptxSM80[:4096])
	f.Add([]byte(".visible .entry (\n.entry\n.target \n"))
	f.Add([]byte(".entry x"))
	f.Fuzz(func(t *testing.T, src []byte) {
		info := parsePTX(src)
		if len(info.Entries) > len(src) {
			t.Fatalf("%d entries from %d bytes", len(info.Entries), len(src))
		}
	})
}
