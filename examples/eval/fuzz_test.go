package main

import (
	"io"
	"math"
	"testing"
)

// FuzzParseFlags feeds arbitrary command lines to the flag parser: it
// must never panic, and what it accepts must be usable (finite,
// non-negative sampling and optimiser values).
func FuzzParseFlags(f *testing.F) {
	f.Add("-model", "testdata", "-k", "0")
	f.Add("-sampler", "http://[::1]:8000,", "-sandbox", "local")
	f.Add("-n", "-1", "-max-response", "99999999999999999999")
	f.Add("-top-p", "NaN", "-temperature", "-Inf")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		o, err := parseFlags([]string{a, b, c, d}, io.Discard)
		if err != nil {
			return
		}
		for _, v := range []float64{o.temperature, o.topP} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("accepted %v in %q", v, []string{a, b, c, d})
			}
		}
	})
}
