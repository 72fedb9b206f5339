package main

import (
	"io"
	"testing"

	"github.com/agentrl/agentrl/policy/openai"
)

// FuzzParseFlags feeds arbitrary command lines to the flag parser: it
// must never panic, and what it accepts must be servable (a known
// log-probs mode, no negative session count, a positive shutdown
// timeout, a served name, adapters with a name and a folder, none named
// twice or as the served model).
func FuzzParseFlags(f *testing.F) {
	f.Add("-model", "testdata", "-max-sessions", "-3")
	f.Add("-addr", ":0", "-logprobs-mode", "processed_logprobs")
	f.Add("-shutdown-timeout", "-1s", "-name", "")
	f.Add("-lora-modules", "a=testdata", "-lora-modules", "a=b=c")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		o, err := parseFlags([]string{a, b, c, d}, io.Discard)
		if err != nil {
			return
		}
		if o.logprobsMode != openai.RawLogprobs && o.logprobsMode != openai.ProcessedLogprobs ||
			o.maxSessions < 0 || o.shutdownTimeout <= 0 || o.name == "" || o.model == "" {
			t.Fatalf("accepted %+v from %q", o, []string{a, b, c, d})
		}
		seen := map[string]bool{}
		for _, m := range o.loraModules {
			if m.name == "" || m.dir == "" || m.name == o.name || seen[m.name] {
				t.Fatalf("accepted adapter %+v from %q", m, []string{a, b, c, d})
			}
			seen[m.name] = true
		}
	})
}
