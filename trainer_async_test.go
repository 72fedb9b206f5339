package agentrl_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/rollout"
)

// Save makes the tabular model a lm.Saver: its table as JSON.
func (m *tabular) Save(dir string, _ lm.SaveOptions) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(m.w)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "table.json"), b, 0o644)
}

// testFleet is an inference fleet in miniature: a sampler with weights
// of its own (a second tabular model) that it reloads from what Publish
// saves, tagging every generation with the version it holds, as
// package fleet does over real servers. delay is how long loading a
// checkpoint takes before the swap, and genDelay how long each Generate
// call takes; tag, when set, replaces the version a generation reports;
// fail, when set, fails Publish, and failAt fails the publication of
// that version once.
type testFleet struct {
	mu       sync.RWMutex
	model    *tabular
	version  int
	delay    time.Duration
	genDelay time.Duration
	tag      func(v int) string
	fail     error
	failAt   int
	dir      string

	pubMu     sync.Mutex
	published []int
}

func newTestFleet(t *testing.T) *testFleet {
	return &testFleet{model: newTabular(banditAlphabet), dir: t.TempDir()}
}

func (f *testFleet) Generate(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	time.Sleep(f.genDelay)
	gens, err := f.model.Generate(ctx, reqs)
	for i := range gens {
		gens[i].WeightVersion = strconv.Itoa(f.version)
		if f.tag != nil {
			gens[i].WeightVersion = f.tag(f.version)
		}
	}
	return gens, err
}

func (f *testFleet) Publish(ctx context.Context, version int, w lm.Saver) error {
	if f.fail != nil {
		return f.fail
	}
	if f.failAt > 0 && version == f.failAt {
		f.failAt = 0
		return errors.New("server http://b: connection reset")
	}
	dir := filepath.Join(f.dir, strconv.Itoa(version))
	if err := w.Save(dir, lm.SaveOptions{}); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "table.json"))
	if err != nil {
		return err
	}
	var table []float32
	if err := json.Unmarshal(b, &table); err != nil {
		return err
	}
	time.Sleep(f.delay) // loading, while the old weights still serve
	f.mu.Lock()
	copy(f.model.w, table)
	f.version = version
	f.mu.Unlock()
	f.pubMu.Lock()
	f.published = append(f.published, version)
	f.pubMu.Unlock()
	return nil
}

func (f *testFleet) versions() []int {
	f.pubMu.Lock()
	defer f.pubMu.Unlock()
	return append([]int(nil), f.published...)
}

// newFleetTrainer trains a fresh tabular policy with rollouts from f.
func newFleetTrainer(t *testing.T, cfg agentrl.TrainerConfig, f *testFleet) (*agentrl.Trainer, *tabular) {
	t.Helper()
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: f, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	tr, err := agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4), Sync: f})
	require.NoError(t, err)
	t.Cleanup(func() { tr.Close() })
	return tr, m
}

// TestSyncFleetMatchesLocal: with MaxStaleness 0 and a fleet that gets
// the weights after every step, each step samples with the weights it
// trains, as the local sampler does: same seeds, same weights, so the
// same trajectories and bit for bit the same policy after three steps.
func TestSyncFleetMatchesLocal(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	local, ml := newBandit(t, cfg, banditReward)
	f := newTestFleet(t)
	remote, mr := newFleetTrainer(t, cfg, f)
	for range 3 {
		a, err := local.Step(ctx)
		require.NoError(t, err)
		b, err := remote.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, a.RewardMean, b.RewardMean)
		assert.Equal(t, []int{16}, b.StalenessHist, "every trajectory current")
	}
	assert.Equal(t, ml.w, mr.w)
	assert.Equal(t, []int{0, 1, 2, 3}, f.versions(), "published before the first rollout and after each step")
}

// TestAsyncStalenessBound: with η = 2, turns of 5 ms and a checkpoint
// load of 30 ms, the rollouts run ahead on old weights while the trainer
// trains and publishes; no trajectory is ever more than η versions
// stale, and the bound is reached: the batch of step 3 was sampled with
// version 0 (its 15 ms of rollouts end before version 1 is loaded, 30 ms
// after step 1).
func TestAsyncStalenessBound(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.MaxStaleness, cfg.SyncEvery = 2, 1
	f := newTestFleet(t)
	f.delay, f.genDelay = 30*time.Millisecond, 5*time.Millisecond
	tr, m := newFleetTrainer(t, cfg, f)
	before := m.prob(tokA, tokC)
	maxSeen, overlap := 0, 0.0
	for k := 1; k <= 8; k++ {
		st, err := tr.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, k-1, st.PolicyVersion)
		assert.LessOrEqual(t, st.StalenessMax, 2)
		require.Len(t, st.StalenessHist, 3)
		total := 0
		for _, n := range st.StalenessHist {
			total += n
		}
		assert.Equal(t, 16, total)
		maxSeen = max(maxSeen, st.StalenessMax)
		overlap += st.OverlapSeconds
		if k == 3 {
			assert.Equal(t, 2, st.StalenessMax, "step 3's batch was made with version 0 while version 1 loaded")
		}
		mp := st.Map()
		assert.Contains(t, mp, "async/staleness_frac/2")
		assert.Contains(t, mp, "perf/throughput")
	}
	assert.Equal(t, 2, maxSeen)
	assert.Greater(t, overlap, 0.0, "rollouts ran while the trainer trained or published")
	assert.Greater(t, m.prob(tokA, tokC), before, "it still learns")
}

// TestAsyncResume: an asynchronous run checkpointed after two steps
// resumes on a fresh fleet (holding the initial weights): the first step
// after the resume publishes the restored weights as version 2 before
// any rollout, and the checkpoint's prompt-sampler position is that of
// the next untrained batch, as in a synchronous run, not the rollouts'
// that ran ahead.
func TestAsyncResume(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.MaxStaleness = 1
	root := checkpoint.Root{Dir: filepath.Join(t.TempDir(), "ckpt")}

	a, ma := newFleetTrainer(t, cfg, newTestFleet(t))
	sync, _ := newBandit(t, banditConfig(), banditReward)
	for range 2 {
		_, err := a.Step(ctx)
		require.NoError(t, err)
		_, err = sync.Step(ctx)
		require.NoError(t, err)
	}
	dirA, err := a.SaveCheckpoint(ctx, root, 0)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	dirS := filepath.Join(t.TempDir(), "sync")
	require.NoError(t, sync.SaveTo(dirS))
	stateOf := func(dir string) agentrl.TrainerState {
		b, err := os.ReadFile(filepath.Join(dir, agentrl.CheckpointStateFile))
		require.NoError(t, err)
		var st agentrl.TrainerState
		require.NoError(t, json.Unmarshal(b, &st))
		return st
	}
	assert.Equal(t, stateOf(dirS).Sampler, stateOf(dirA).Sampler)

	f := newTestFleet(t)
	b, mb := newFleetTrainer(t, cfg, f)
	ok, err := b.Resume(root)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, ma.w, mb.w)
	for k := 3; k <= 5; k++ {
		st, err := b.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, k, st.Step)
		assert.LessOrEqual(t, st.StalenessMax, 1)
	}
	assert.Equal(t, 2, f.versions()[0], "the restored weights went out before any rollout")
	assert.Equal(t, 5, b.StepsDone())
}

// TestAsyncVersionErrors: a sampler that reports a version the trainer
// never published, or none, or a fleet that fails to publish, stops the
// step with an error that says so.
func TestAsyncVersionErrors(t *testing.T) {
	ctx := context.Background()
	cfg := banditConfig()
	cfg.MaxStaleness = 1

	future := newTestFleet(t)
	future.tag = func(v int) string { return strconv.Itoa(v + 7) }
	tr, _ := newFleetTrainer(t, cfg, future)
	_, err := tr.Step(ctx)
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "sampled with weight version 7, -7 versions from the policy's 0")

	untagged := newTestFleet(t)
	untagged.tag = func(int) string { return "" }
	tr, _ = newFleetTrainer(t, cfg, untagged)
	_, err = tr.Step(ctx)
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "has no weight version")

	broken := newTestFleet(t)
	broken.fail = errors.New("server http://a: status 400")
	tr, _ = newFleetTrainer(t, cfg, broken)
	_, err = tr.Step(ctx)
	assert.ErrorContains(t, err, "publishing the weights (version 0): server http://a: status 400")
}

// TestAsyncConfigErrors: rollouts ahead need a Sync, a Sync needs a
// Policy that can save itself, and SyncEvery must not exceed η+1.
func TestAsyncConfigErrors(t *testing.T) {
	cfg := banditConfig()
	cfg.MaxStaleness = 1
	m := newTabular(banditAlphabet)
	eng, err := rollout.NewEngine(rollout.Config{Sampler: m, Tokenizer: alphaTokenizer{banditAlphabet}, MaxResponseTokens: 8})
	require.NoError(t, err)
	_, err = agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: m, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4)})
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "TrainerParts.Sync is nil")

	type notSaver struct{ lm.Trainable }
	_, err = agentrl.NewTrainer(cfg, agentrl.TrainerParts{Policy: notSaver{m}, Engine: eng, Reward: banditReward, Prompts: banditPrompts(4), Sync: newTestFleet(t)})
	require.ErrorIs(t, err, agentrl.ErrTrainer)
	assert.ErrorContains(t, err, "lm.Saver")

	cfg.SyncEvery = 3
	err = cfg.Validate()
	require.ErrorIs(t, err, agentrl.ErrTrainerConfig)
	assert.ErrorContains(t, err, "SyncEvery: 3 exceeds MaxStaleness+1 = 2")
}

// TestPublishFailureAfterUpdate: when only the publication after an
// update fails, the step counts, and the next step publishes that
// version again before its rollout.
func TestPublishFailureAfterUpdate(t *testing.T) {
	ctx := context.Background()
	for _, eta := range []int{0, 1} {
		cfg := banditConfig()
		cfg.MaxStaleness = eta
		f := newTestFleet(t)
		f.failAt = 1
		tr, _ := newFleetTrainer(t, cfg, f)
		_, err := tr.Step(ctx)
		require.ErrorContains(t, err, "publishing the weights (version 1): server http://b: connection reset")
		assert.Equal(t, 1, tr.StepsDone())
		st, err := tr.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, st.Step)
		assert.LessOrEqual(t, st.StalenessMax, eta)
		assert.Equal(t, []int{0, 1, 2}, f.versions(), "η %d", eta)
	}
}
