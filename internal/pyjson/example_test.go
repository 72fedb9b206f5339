package pyjson_test

import (
	"fmt"

	"github.com/agentrl/agentrl/internal/pyjson"
)

func ExampleQuote() {
	fmt.Println(pyjson.Quote("Doc 1 (Title: \"Ålesund\")\n<b>port</b>"))
	// Output: "Doc 1 (Title: \"Ålesund\")\n<b>port</b>"
}
