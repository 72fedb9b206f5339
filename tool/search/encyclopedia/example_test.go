package encyclopedia_test

import (
	"fmt"
	"log"

	"github.com/agentrl/agentrl/tool/search/encyclopedia"
)

// ExampleGenerate makes a small encyclopedia and prints a passage and a
// two-hop question it answers.
func ExampleGenerate() {
	e, err := encyclopedia.Generate(encyclopedia.Config{Seed: 3, People: 2, Towns: 2, Rivers: 1, Mountains: 1, Guilds: 1, Works: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(e.Passages), "passages,", len(e.Questions), "questions")
	for _, q := range e.Questions {
		if q.Hops == 2 {
			fmt.Printf("%s → %s (passages %v)\n", q.Text, q.Answer, q.Evidence)
			for _, p := range e.Passages {
				if p.ID == q.Evidence[0] {
					fmt.Println(p.Contents())
				}
			}
			break
		}
	}
	// Output:
	// 8 passages, 30 questions
	// Which river flows through the town where Dribael Vobromaerk was born? → Ronux River (passages [1 4])
	// "Dribael Vobromaerk"
	// Dribael Vobromaerk was born in 1857 in Stikai and became an engineer. His canal The Midnight Tide was completed in 1897.
}
