package dataset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/agentrl/agentrl/dataset"
)

// Reading a verl parquet set row by row; the file is read row group by row
// group, never whole.
func ExampleOpenParquet() {
	r, err := dataset.OpenParquet("testdata/verl_gsm8k_hyparquet.parquet", dataset.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	fmt.Println("rows:", r.NumRows(), "row groups:", r.NumRowGroups())
	ctx := context.Background()
	for {
		ex, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		answers, _ := ex.RewardModel.GroundTruth.Answers()
		fmt.Println(ex.Row, ex.DataSource, len(ex.Prompt), ex.Prompt[1].Role, answers, ex.ExtraInfo["split"])
	}
	// Output:
	// rows: 5 row groups: 3
	// 0 openai/gsm8k 2 user [72] train
	// 1 openai/gsm8k 2 user [10] train
	// 2 openai/gsm8k 2 user [5] train
	// 3 openai/gsm8k 2 user [42] train
	// 4 openai/gsm8k 2 user [624] train
}

// Code tests stored the Open-AgentRL way: reward_model is a JSON string whose
// ground_truth holds inputs and outputs.
func ExampleExample_Tests() {
	exs, err := dataset.Load(context.Background(),
		dataset.Options{PromptKey: "problem", StringPrompt: true},
		"testdata/openagentrl_lcb_hyparquet.parquet")
	if err != nil {
		log.Fatal(err)
	}
	for _, ex := range exs {
		tc, err := ex.Tests()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("fn_name=%q cases=%q\n", tc.FnName, tc.Cases)
	}
	// Output:
	// fn_name="" cases=[{"1 2\n" "3\n"} {"10 -3\n" "7\n"}]
	// fn_name="twoSum" cases=[{"[2,7,11,15]\n9" "[0, 1]"} {"[3,2,4]\n6" "[1, 2]"}]
}

// A shuffled sampler saved mid-epoch and resumed in a fresh process yields
// the batches the first one would have.
func ExampleSampler() {
	cfg := dataset.SamplerConfig{BatchSize: 3, Seed: 42, Shuffle: true, DropLast: true}
	s, err := dataset.NewSampler(8, cfg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Next(), s.Next())
	saved, _ := json.Marshal(s.State()) // epoch 0 has no full batch left
	fmt.Println(string(saved))
	fmt.Println("then:", s.Next())

	var st dataset.SamplerState
	if err := json.Unmarshal(saved, &st); err != nil {
		log.Fatal(err)
	}
	resumed, _ := dataset.NewSampler(8, cfg)
	if err := resumed.Restore(st); err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed:", resumed.Next())
	// Output:
	// [4 3 2] [0 7 6]
	// {"seed":42,"epoch":1,"offset":0}
	// then: [4 3 1]
	// resumed: [4 3 1]
}

// DAPO dynamic sampling: groups whose accuracy does not vary are dropped,
// and generation goes on until the training batch has enough groups.
func ExampleGroupFilter() {
	f, err := dataset.NewGroupFilter[string](dataset.FilterConfig{BatchGroups: 2, MaxGenBatches: 4})
	if err != nil {
		log.Fatal(err)
	}
	genBatches := []struct {
		trajs  []string
		groups []string
		acc    []float64
	}{
		{[]string{"a1", "a2", "b1", "b2"}, []string{"a", "a", "b", "b"}, []float64{1, 1, 0, 1}},
		{[]string{"c1", "c2", "d1", "d2"}, []string{"c", "c", "d", "d"}, []float64{0, 0, 1, 0}},
	}
	for _, g := range genBatches {
		rep, err := f.Add(g.trajs, g.groups, g.acc)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("gen batch %d: kept %d, dropped %v, ready %v\n", rep.GenBatch, rep.KeptGroups, rep.Dropped, rep.Ready)
		if f.Ready() {
			break
		}
	}
	batch, err := f.Take()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(batch.Items, batch.Groups, batch.Stats.GenBatches)
	// Output:
	// gen batch 1: kept 1, dropped [{a 2 1}], ready false
	// gen batch 2: kept 1, dropped [{c 2 0}], ready true
	// [b1 b2 d1 d2] [b b d d] 2
}
