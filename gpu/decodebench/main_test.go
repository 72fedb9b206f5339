package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/policy"
)

// The whole program on the CPU with the tiny shape: the table has a row
// per batch, transformers' figures from -hf beside, and the JSON output.
func TestRunTinyOnCPU(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf.jsonl")
	require.NoError(t, os.WriteFile(hf, []byte("torch 2.x\n{\"model\": \"tiny\", \"batch\": 3, \"prompt\": 12, \"new\": 6, \"tokens_per_s\": 10}\n"), 0o644))
	out := filepath.Join(dir, "out.json")
	table := filepath.Join(dir, "table.txt")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-models", "tiny", "-batches", "1,3", "-prompt", "12", "-new", "6", "-device", "cpu",
		"-bandwidth", "10", "-hf", hf, "-json", out, "-table", table}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	written, err := os.ReadFile(table)
	require.NoError(t, err)
	assert.Equal(t, stdout.String(), string(written), "-table holds the final table")
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 3, stdout.String())
	assert.Contains(t, lines[0], "floor tok/s")
	assert.True(t, strings.HasPrefix(lines[2], "tiny        3"), lines[2])
	assert.Contains(t, lines[2], "×", "the ratio to transformers")
	var rs []result
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rs))
	require.Len(t, rs, 2)
	for _, r := range rs {
		assert.Positive(t, r.E2E)
		assert.GreaterOrEqual(t, r.Decode, 0.0, "0 when the decode steps are too short to time")
		assert.Positive(t, r.Serve)
		assert.Equal(t, 1e10, r.Bandwidth)
	}
	assert.Equal(t, 10.0, rs[1].HF)
}

func TestDecodeFloor(t *testing.T) {
	js, _ := shape("tiny")
	cfg, err := policy.ParseConfig([]byte(js))
	require.NoError(t, err)
	// Tiny: 2 layers, 2 KV heads of dim 16: 2·2·2·16·2 = 256 bytes per
	// cached position in bf16; the weights W = 2·NumParams bytes. Batch
	// 2, prompt 3, 3 new tokens: decode steps t = 1, 2 read W + 2·(3+t)·256
	// bytes, 2W + 2·9·256 in all, for 2·2 tokens.
	w := 2 * float64(cfg.NumParams())
	bw := 1e9
	want := 4 / ((2*w + 2*9*256) / bw)
	assert.InEpsilon(t, want, decodeFloor(cfg, 2, 3, 3, bw), 1e-12)
}

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parse([]string{"-models", "tiny"}, &stderr)
	require.NoError(t, err)
	assert.Equal(t, []int{32, 128, 256}, o.batches)
	assert.Equal(t, 512, o.prompt)
	js, ok := shape("0.6b")
	require.True(t, ok)
	assert.Contains(t, js, `"num_hidden_layers": 28`)
	for _, bad := range [][]string{{"-models", "7b"}, {"-batches", "0"}, {"-new", "1"}} {
		_, err = parse(bad, &stderr)
		require.Error(t, err, "%v", bad)
	}
}

// -budget stops starting points once spent: with 1ns, none runs, and the
// report is still written (the header only, no rows); -split=false
// leaves the decode column empty.
func TestBudgetAndSplit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-models", "tiny", "-batches", "2", "-prompt", "4", "-new", "3", "-device", "cpu",
		"-bandwidth", "10", "-json", out, "-budget", "1ns"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	assert.Contains(t, stderr.String(), "budget of 1ns spent")
	assert.Len(t, strings.Split(strings.TrimSpace(stdout.String()), "\n"), 1, "the header alone")
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "null", strings.TrimSpace(string(data)))

	stdout.Reset()
	err = run(context.Background(), []string{"-models", "tiny", "-batches", "2", "-prompt", "4", "-new", "3", "-device", "cpu",
		"-bandwidth", "10", "-json", out, "-split=false", "-serve=false"}, &stdout, &stderr)
	require.NoError(t, err, stderr.String())
	var rs []result
	data, err = os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rs))
	require.Len(t, rs, 1)
	assert.Positive(t, rs[0].E2E)
	assert.Zero(t, rs[0].Decode, "not split out")
	assert.Zero(t, rs[0].Serve, "-serve=false")
}
