package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/fleet"
)

// serveEnv makes the test binary a fleet server over the folder it names
// (the os/exec helper-process idiom), as -serve makes the program one;
// deviceEnv holds the device flags the program would pass.
const (
	serveEnv  = "ARITH_TEST_SERVE_MODEL"
	deviceEnv = "ARITH_TEST_SERVE_DEVICE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveEnv); dir != "" {
		var dc device.Config
		fs := flag.NewFlagSet("serve", flag.ExitOnError)
		dc.RegisterFlags(fs)
		_ = fs.Parse(strings.Fields(os.Getenv(deviceEnv)))
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := serveMode(ctx, dir, fleet.SGLang, dc, os.Stdout, os.Stderr) // -fleet-kind's default
		stop()
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testServerCommand(dir string, dc device.Config) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"="+dir, deviceEnv+"="+strings.Join(dc.Args(), " "))
	return cmd
}

// TestRunFleet runs the disaggregated pipeline at a tiny size: two
// server processes sample the rollouts, the trainer publishes after each
// of three steps and samples at most one step ahead. It checks the
// outputs and the metrics the fleet adds, not learning.
func TestRunFleet(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := parseFlags(tinyArgs(dir, "-tool", "calculator", "-fleet", "2", "-rl-steps", "3"), &stderr)
	require.NoError(t, err)
	o.serverCommand = testServerCommand
	require.NoError(t, runOptions(ctx, o, &stdout, &stderr), stderr.String())
	assert.Contains(t, stderr.String(), "fleet: 2 local servers")
	for _, s := range []string{"[server 0] device: ", "[server 1] device: "} {
		assert.Contains(t, stderr.String(), s, "the servers open the trainer's device")
	}

	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	steps := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row))
		if _, ok := row["async/staleness_max"]; !ok {
			continue // the step-0 evaluation row
		}
		steps++
		assert.LessOrEqual(t, row["async/staleness_max"], 1.0)
		assert.Contains(t, row, "timing_s/sync_weights")
		assert.Contains(t, row, "perf/throughput")
	}
	assert.Equal(t, 3, steps)
	ents, err := os.ReadDir(filepath.Join(dir, "fleet"))
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"v00000002", "v00000003"}, names, "versions 0–3 published, the last two kept")
}

// TestRunFleetLoRA: with -lora-rank the fleet's server keeps the SFT
// weights and hot-loads each step's adapter; the published versions are
// PEFT adapter folders, not checkpoints.
func TestRunFleetLoRA(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := parseFlags(tinyArgs(dir, "-tool", "calculator", "-fleet", "1", "-rl-steps", "2", "-lora-rank", "4"), &stderr)
	require.NoError(t, err)
	o.serverCommand = testServerCommand
	require.NoError(t, runOptions(ctx, o, &stdout, &stderr), stderr.String())
	ents, err := os.ReadDir(filepath.Join(dir, "fleet"))
	require.NoError(t, err)
	require.NotEmpty(t, ents)
	for _, e := range ents {
		v := filepath.Join(dir, "fleet", e.Name())
		_, err := os.Stat(filepath.Join(v, "adapter_config.json"))
		assert.NoError(t, err, "%s holds an adapter", v)
		_, err = os.Stat(filepath.Join(v, "adapter_model.safetensors"))
		assert.NoError(t, err, v)
		_, err = os.Stat(filepath.Join(v, "model.safetensors"))
		assert.True(t, os.IsNotExist(err), "%s holds no full weights", v)
	}
}

// TestRunFleetServersFailFast: servers given with -fleet-servers that
// cannot serve the fleet stop the program before any training or
// evaluation, naming the server and what it lacks: one that does not
// answer, and a vLLM server started without VLLM_SERVER_DEV_MODE=1 (its
// weight-update routes answer FastAPI's 404).
func TestRunFleetServersFailFast(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	noDevMode := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/models" {
			fmt.Fprint(w, `{"object":"list","data":[{"id":"arith","max_model_len":512}]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"detail":"Not Found"}`)
	}))
	defer noDevMode.Close()
	for _, c := range []struct{ url, kind, msg string }{
		{dead.URL, "sglang", "does not answer"},
		{noDevMode.URL, "vllm", "VLLM_SERVER_DEV_MODE=1"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			dir := t.TempDir()
			var stdout, stderr bytes.Buffer
			o, err := parseFlags(tinyArgs(dir, "-tool", "calculator", "-fleet-servers", c.url, "-fleet-kind", c.kind, "-fleet-dir", t.TempDir()), &stderr)
			require.NoError(t, err)
			err = runOptions(context.Background(), o, &stdout, &stderr)
			require.Error(t, err)
			assert.ErrorContains(t, err, c.url)
			assert.ErrorContains(t, err, c.msg)
			_, statErr := os.Stat(filepath.Join(dir, "sft-model"))
			assert.True(t, os.IsNotExist(statErr), "no SFT ran")
			assert.NotContains(t, stderr.String(), "evaluating")
		})
	}
}

// TestRunFleetServersVersion: running servers that hold another version
// than the weights RL starts from (a server keeps the last weights it
// loaded: an earlier run's version 5) stop the program before any work,
// saying what -fleet-version does; with -fleet-version adopt the program
// takes their number and goes on.
func TestRunFleetServersVersion(t *testing.T) {
	earlier := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"arith","max_model_len":512}]}`)
		case "/model_info":
			fmt.Fprint(w, `{"model_path":"/m","weight_version":"5"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"detail":"Not Found"}`)
		}
	}))
	defer earlier.Close()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := tinyArgs(dir, "-tool", "calculator", "-fleet-servers", earlier.URL, "-fleet-dir", t.TempDir())
	err := run(context.Background(), args, &stdout, &stderr)
	require.ErrorIs(t, err, fleet.ErrVersion)
	assert.ErrorContains(t, err, earlier.URL+` "5", but Config.Version is 0`)
	assert.ErrorContains(t, err, "(-fleet-version start; -fleet-version adopt takes the servers' number, reset publishes this run's starting weights to them first)")
	assert.NoDirExists(t, filepath.Join(dir, "sft-model"), "no SFT ran")

	stderr.Reset()
	require.NoError(t, run(context.Background(), append(args, "-rl-steps", "0", "-out", t.TempDir(), "-fleet-version", "adopt"), &stdout, &stderr), stderr.String())
	assert.Contains(t, stderr.String(), "fleet: they hold version 5, taken as it is (-fleet-version adopt): the run samples their weights until it publishes its own as version 0 before its first step; RL publishes its starting weights as version 0 before its first rollout, then version k after step k\n")
}
