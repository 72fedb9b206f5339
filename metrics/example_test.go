package metrics_test

import (
	"fmt"
	"math"
	"os"
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
