package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/rocm-go/rocm/tokenizer"
)

// A chat prompt for a Llama 3 style model, encoded and decoded back.
func Example() {
	tk, err := tokenizer.LoadDir("testdata/llama3")
	if err != nil {
		log.Fatal(err)
	}
	prompt, err := tk.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: "hello"}}, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", prompt[len(prompt)-57:])
	ids, err := tk.Encode(prompt, false) // the prompt holds <|begin_of_text|> already
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tk.Decode(ids, false) == prompt)
	fmt.Println(tk.EOS())
	// Output:
	// "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	// true
	// [276 275 279]
}

func ExampleTokenizer_Encode() {
	tk, err := tokenizer.Load("testdata/llama3/tokenizer.json")
	if err != nil {
		log.Fatal(err)
	}
	ids, err := tk.Encode(" hello there", true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids)
	var toks []string
	for _, id := range ids {
		s, _ := tk.Token(id)
		toks = append(toks, s)
	}
	fmt.Printf("%q\n", toks)
	fmt.Printf("%q\n", tk.Decode(ids, true))
	// Output:
	// [274 272 258 114 101]
	// ["<|begin_of_text|>" "Ġhello" "Ġthe" "r" "e"]
	// " hello there"
}

// A stream decoder holds back the bytes of an unfinished character.
func ExampleStreamDecoder() {
	tk, err := tokenizer.Load("testdata/llama3/tokenizer.json")
	if err != nil {
		log.Fatal(err)
	}
	ids, _ := tk.Encode("hi 😀!", false)
	d := tk.NewStreamDecoder(true)
	for _, id := range ids {
		fmt.Printf("%d:%q ", id, d.Add(id))
	}
	fmt.Printf("flush:%q\n", d.Flush())
	// Output:
	// 104:"h" 105:"i" 32:" " 240:"" 159:"" 152:"" 128:"😀" 33:"!" flush:""
}

// A conversation with a tool: the model's call and the tool's result,
// rendered through a template of Qwen2.5's shape.
func ExampleChatTemplate_Render() {
	tmpl, err := tokenizer.NewChatTemplate(`
{%- for t in tools %}{{ "tool: " + t.function.name + "\n" }}{% endfor %}
{%- for m in messages %}
	{{- m.role + ":" }}
	{%- for c in m.tool_calls %}{{ " call " + c.function.name + "(" + c.function.arguments | tojson + ")" }}{% endfor %}
	{%- if m.content %}{{ " " + m.content }}{% endif %}
	{{- "\n" }}
{%- endfor %}`, nil)
	if err != nil {
		log.Fatal(err)
	}
	out, err := tmpl.Render([]tokenizer.Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []tokenizer.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: "22 C"},
	}, tokenizer.ChatOptions{Tools: []tokenizer.Tool{{Name: "get_weather"}}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(out)
	fmt.Println(tmpl.TakesTools())
	// Output:
	// tool: get_weather
	// user: Weather in Paris?
	// assistant: call get_weather({"city": "Paris"})
	// tool: 22 C
	// true
}
