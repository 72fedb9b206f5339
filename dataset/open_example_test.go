package dataset_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"

	"github.com/agentrl/agentrl/dataset"
)

// Open picks the reader by the file's extension (.parquet, or .jsonl and
// .ndjson for JSON Lines); both read verl's layout row by row, and Next
// returns io.EOF after the last example. A JSON Lines file's blank lines
// are skipped and not counted as rows.
func ExampleOpen() {
	r, err := dataset.Open("testdata/verl_mixed.jsonl", dataset.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for {
		ex, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		last := ex.Prompt[len(ex.Prompt)-1]
		fmt.Printf("%d %-12s %-5s %d messages, %s: %q\n", ex.Row, ex.DataSource, ex.Ability, len(ex.Prompt), last.Role, last.Content)
	}
	// Output:
	// 0 openai/gsm8k math  1 messages, user: "What is 6 * 7? Let's think step by step and output the final answer after \"####\"."
	// 1 math_dapo    MATH  2 messages, user: "Half of 3?"
	// 2 math_dapo          1 messages, user: "x^2 = 4, x > 0?"
	// 3 skywork_code code  1 messages, user: "Add two numbers."
	// 4 deepcoder    code  1 messages, user: "Double it."
}
