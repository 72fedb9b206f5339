package plot_test

import (
	"bytes"
	"fmt"
	"image/png"
	"math"

	"github.com/agentrl/agentrl/metrics"
	"github.com/agentrl/agentrl/metrics/plot"
)

func ExampleWrite() {
	var rows []metrics.Row
	for step := 1; step <= 20; step++ {
		s := float64(step)
		rows = append(rows, metrics.Row{Step: step, Values: map[string]float64{
			"critic/rewards/mean": 1 - math.Exp(-s/8),
			"actor/entropy":       math.Exp(-s / 30),
		}})
	}
	var buf bytes.Buffer // LogFile reads a log and writes a PNG file
	if err := plot.Write(&buf, rows, plot.Config{}); err != nil {
		fmt.Println(err)
		return
	}
	img, err := png.Decode(&buf)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Two default panels have data: one row of two.
	fmt.Println(img.Bounds().Dx(), "x", img.Bounds().Dy())
	// Output: 1200 x 300
}
