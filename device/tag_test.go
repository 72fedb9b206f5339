package device_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
)

// listDeps runs go list over every package of the module and its tests'
// dependencies with tags, and returns each package outside this module
// with the Go files that build selects for it.
func listDeps(t *testing.T, tags string) map[string]string {
	t.Helper()
	args := []string{"list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}} {{.ImportPath}} {{.GoFiles}} {{.CgoFiles}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, "../...")...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		mod, rest, _ := strings.Cut(line, " ")
		if mod == "" || mod == "github.com/agentrl/agentrl" {
			continue // the standard library, this module
		}
		path, files, _ := strings.Cut(rest, " ")
		deps[path] = files
	}
	return deps
}

// TestBuildTagIsOurs pins why the GPU's build tag is agentrl_cuda: with
// it, every dependency compiles exactly the files it compiles without it
// (no dependency's build constraints mention it) and gorgonia.org/cu
// stays out; with gorgonia's tag cuda, gorgonia's CUDA engine pulls
// gorgonia.org/cu in (whose init exits a process without a driver).
func TestBuildTagIsOurs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	plain := listDeps(t, "")
	ours := listDeps(t, device.BuildTag)
	require.NotEmpty(t, plain)
	assert.Equal(t, plain, ours, "a dependency selects files by the tag %s", device.BuildTag)
	for dep := range ours {
		assert.False(t, strings.HasPrefix(dep, "gorgonia.org/cu"), "-tags %s imports %s", device.BuildTag, dep)
	}

	// The collision itself. -e lists gorgonia.org/cu even where its module
	// was never downloaded (no build needs it), and GOPROXY=off keeps this
	// test off the network.
	cmd := exec.Command("go", "list", "-e", "-deps", "-tags", "cuda", "-f", "{{.ImportPath}}", "../...")
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.Output()
	if err != nil {
		t.Logf("go list -tags cuda: %v; the collision is not checked here", err)
		return
	}
	assert.Contains(t, strings.Fields(string(out)), "gorgonia.org/cu",
		"-tags cuda switches gorgonia to gorgonia.org/cu (if this fails, gorgonia changed; the tag stays ours)")
}
