package device_test

import (
	"errors"
	"testing"

	"github.com/agentrl/agentrl/device"
)

// FuzzParseSpec: any string gives a Spec or an ErrInvalid error, never a
// panic; an accepted Spec is valid, and its String parses back to it.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"auto", "cpu", "cuda", "cuda:0", "cuda:12", "cuda:", "cuda:-1", "cuda:999999999", "cuda:1234567890", "gpu", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := device.ParseSpec(s)
		if err != nil {
			if !errors.Is(err, device.ErrInvalid) {
				t.Fatalf("ParseSpec(%q): %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		if err := (device.Config{Device: spec}).Validate(); err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, which is invalid: %v", s, spec, err)
		}
		back, err := device.ParseSpec(spec.String())
		if err != nil || back != spec {
			t.Fatalf("ParseSpec(%q) = %+v; its String %q parses to %+v, %v", s, spec, spec.String(), back, err)
		}
	})
}

// FuzzParsePrecision: any string gives a Precision whose String is the
// input, or an ErrInvalid error.
func FuzzParsePrecision(f *testing.F) {
	for _, s := range []string{"auto", "fp32", "tf32", "bf16", "fp16", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := device.ParsePrecision(s)
		if err != nil {
			if !errors.Is(err, device.ErrInvalid) {
				t.Fatalf("ParsePrecision(%q): %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		if p.String() != s {
			t.Fatalf("ParsePrecision(%q) = %v", s, p)
		}
	})
}
