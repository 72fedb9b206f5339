package lm_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLightDependencies pins the reason package lm exists: the packages
// that only talk to a model must not link the model, its kernels or a
// tensor library.
func TestLightDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	heavy := []string{
		"github.com/agentrl/agentrl/policy",
		"github.com/agentrl/agentrl/internal/cpu",
		"github.com/agentrl/agentrl/internal/gemm",
		"gorgonia.org/",
	}
	for _, pkg := range []string{"../lm", "../rollout", "../fleet", "../policy/openai", "../policy/policytest", "../record"} {
		t.Run(pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, dep := range strings.Fields(string(out)) {
				for _, h := range heavy {
					assert.False(t, dep == h || strings.HasPrefix(dep, h) && strings.HasSuffix(h, "/"), "%s imports %s", pkg, dep)
				}
			}
		})
	}
}
