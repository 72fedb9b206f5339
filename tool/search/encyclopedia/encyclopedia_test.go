package encyclopedia

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/dataset"
	"github.com/agentrl/agentrl/tool/search"
)

var update = flag.Bool("update", false, "rewrite data/*.jsonl from Generate(DefaultConfig())")

// TestShippedFiles checks that the shipped files are the default
// encyclopedia written out; go test -run TestShippedFiles -update
// rewrites them.
func TestShippedFiles(t *testing.T) {
	e, err := Generate(DefaultConfig())
	require.NoError(t, err)
	files := map[string]func(*bytes.Buffer) error{
		"corpus.jsonl": func(b *bytes.Buffer) error { return e.WriteCorpus(b) },
		"train.jsonl":  func(b *bytes.Buffer) error { return e.WriteQuestions(b, "train") },
		"test.jsonl":   func(b *bytes.Buffer) error { return e.WriteQuestions(b, "test") },
	}
	for name, write := range files {
		var b bytes.Buffer
		require.NoError(t, write(&b))
		path := filepath.Join("data", name)
		if *update {
			require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, b.String(), string(got), "%s differs from Generate(DefaultConfig()); run go test -run TestShippedFiles -update", path)
	}
}

// TestQuestionsAreAnswerable checks the promises of the package doc on the
// default encyclopedia and a larger one: every answer is written in the
// last passage read, every question names its first passage's title,
// a two-hop question's first passage names the second's title, and the
// splits share no subject.
func TestQuestionsAreAnswerable(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), Scaled(3000, 9)} {
		e, err := Generate(cfg)
		require.NoError(t, err)
		byID := map[string]Passage{}
		titles := map[string]bool{}
		for i, p := range e.Passages {
			require.Equal(t, strconv.Itoa(i), p.ID)
			byID[p.ID] = p
			require.False(t, titles[p.Title], "title %q twice", p.Title)
			titles[p.Title] = true
		}
		subjects := map[string]string{}
		hops := map[int]int{}
		for _, q := range e.Questions {
			require.Len(t, q.Evidence, q.Hops)
			first, last := byID[q.Evidence[0]], byID[q.Evidence[len(q.Evidence)-1]]
			require.Contains(t, q.Text, first.Title, q.Kind)
			require.Contains(t, last.Text, q.Answer, "%s: %s", q.Kind, q.Text)
			if q.Hops == 2 {
				require.Contains(t, first.Text, byID[q.Evidence[1]].Title, q.Kind)
			}
			if s, ok := subjects[first.ID]; ok {
				require.Equal(t, s, q.Split, "subject %s in both splits", first.Title)
			}
			subjects[first.ID] = q.Split
			hops[q.Hops]++
		}
		train, test := len(e.Split("train")), len(e.Split("test"))
		require.Equal(t, len(e.Questions), train+test)
		require.InDelta(t, 0.2, float64(test)/float64(len(e.Questions)), 0.08)
		require.Positive(t, hops[1])
		require.Positive(t, hops[2])
	}
}

func TestGenerate(t *testing.T) {
	a, err := Generate(Scaled(1000, 4))
	require.NoError(t, err)
	b, err := Generate(Scaled(1000, 4))
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.InDelta(t, 1000, len(a.Passages), 6)
	c, err := Generate(Scaled(1000, 5))
	require.NoError(t, err)
	require.NotEqual(t, a.Passages[0], c.Passages[0])
	require.Len(t, mustGenerate(t, Scaled(0, 1)).Passages, 12)

	for _, cfg := range []Config{{}, {People: 1, Towns: 1, Rivers: 1}, {People: 1, Towns: 1, Rivers: 1, Mountains: 1, Works: -1}, {People: 1, Towns: 1, Rivers: 1, Mountains: 1, TestPercent: 101}} {
		_, err := Generate(cfg)
		require.Error(t, err, "%+v", cfg)
	}
	var buf bytes.Buffer
	require.Error(t, a.WriteQuestions(&buf, "dev"))
}

func mustGenerate(t *testing.T, cfg Config) *Encyclopedia {
	e, err := Generate(cfg)
	require.NoError(t, err)
	return e
}

// TestShippedFilesRead checks that the shipped files read as a Search-R1
// corpus and as verl prompt sets.
func TestShippedFilesRead(t *testing.T) {
	docs := 0
	require.NoError(t, search.ReadCorpus(Corpus(), func(_ int, d search.Document) error {
		require.True(t, strings.HasPrefix(d.Title(), `"`) && strings.HasSuffix(d.Title(), `"`), d.Title())
		docs++
		return nil
	}))
	require.Equal(t, 300, docs)
	for name, r := range map[string]*bytes.Reader{"train": TrainQuestions(), "test": TestQuestions()} {
		exs, err := dataset.ReadAll(context.Background(), dataset.NewJSONLReader(r, name+".jsonl", dataset.Options{}))
		require.NoError(t, err)
		require.NotEmpty(t, exs)
		for i, ex := range exs {
			require.Equal(t, DataSource, ex.DataSource)
			require.Len(t, ex.Prompt, 1)
			require.Equal(t, "user", ex.Prompt[0].Role)
			gt, ok := ex.RewardModel.GroundTruth.Value.(map[string]any)
			require.True(t, ok)
			require.Len(t, gt["target"], 1)
			require.Equal(t, name, ex.ExtraInfo["split"])
			require.Equal(t, int64(i), ex.ExtraInfo["index"])
		}
	}
}
