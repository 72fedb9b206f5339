package metrics_test

import (
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrl/agentrl/metrics"
)

func ExampleLogger() {
	l := metrics.NewLogger(os.Stdout) // Open(path, …) for a file
	defer l.Close()
	_ = l.Log(1, map[string]float64{"critic/rewards/mean": 0.25, "actor/entropy": 1.5})
	_ = l.Log(2, map[string]float64{"critic/rewards/mean": 0.5, "actor/entropy": math.NaN()})
	// Output:
	// {"step":1,"actor/entropy":1.5,"critic/rewards/mean":0.25}
	// {"step":2,"actor/entropy":null,"critic/rewards/mean":0.5}
}

func ExampleRead() {
	log := `{"step":1,"actor/entropy":1.5}
{"step":2,"actor/entropy":null}
{"step":3,"actor/ent`
	rows, err := metrics.Read(strings.NewReader(log))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rows {
		fmt.Println(r.Step, r.Values["actor/entropy"])
	}
	// The torn last line, left by a crash mid-write, is skipped.

	// Output:
	// 1 1.5
	// 2 NaN
}

// A run resumed from its checkpoint of step 2 goes on with its log: the
// row of step 3, logged after that checkpoint before the run stopped,
// goes, and the resumed run logs step 3 again. A new run may not append
// to the log.
func ExampleOpen_resume() {
	dir, err := os.MkdirTemp("", "run")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "metrics.jsonl")

	first, err := metrics.Open(path, metrics.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		if err := first.Log(step, map[string]float64{"critic/score/mean": float64(step) / 10}); err != nil {
			log.Fatal(err)
		}
	}
	first.Close() // the run stops after step 3; its newest checkpoint is step 2's

	_, err = metrics.Open(path, metrics.Options{})
	fmt.Println("a new run:", errors.Is(err, metrics.ErrOwned))

	resumed, err := metrics.Open(path, metrics.Options{Resume: true, ResumeStep: 2}) // checkpoint.Root.ResumeStep
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("rows cut:", resumed.Removed())
	if err := resumed.Log(3, map[string]float64{"critic/score/mean": 0.35}); err != nil {
		log.Fatal(err)
	}
	resumed.Close()

	rows, err := metrics.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Println(r.Step, r.Values["critic/score/mean"])
	}
	// Output:
	// a new run: true
	// rows cut: 1
	// 1 0.1
	// 2 0.2
	// 3 0.35
}
