package toolcall_test

import (
	"fmt"

	"github.com/rocm-go/rocm/tokenizer/toolcall"
)

// A whole output of Qwen2.5 (the Hermes format): the text and the calls.
func ExampleParse() {
	out := "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	res, err := toolcall.Parse(toolcall.Hermes, out, []string{"get_weather"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("content %q\n", res.Content)
	for _, c := range res.Calls {
		fmt.Println(c.Name, c.Arguments)
	}
	// Output:
	// content "Let me look."
	// get_weather {"city": "Paris"}
}

// An output read as it streams: text that may be a call waits, a call
// comes as its name, then pieces of its arguments.
func ExampleParser() {
	p := toolcall.NewParser(toolcall.Llama3JSON, nil)
	for _, piece := range []string{`{"na`, `me": "get_time", `, `"parameters": {"tz"`, `: "UTC"}}`} {
		d := p.Write(piece)
		for _, c := range d.Calls {
			if c.Name != "" {
				fmt.Printf("call %d: %s\n", c.Index, c.Name)
			} else {
				fmt.Printf("  arguments %q\n", c.Arguments)
			}
		}
	}
	if _, err := p.Close(false); err != nil {
		fmt.Println(err)
	}
	// Output:
	// call 0: get_time
	//   arguments "{\"tz\""
	//   arguments ": \"UTC\"}"
}
