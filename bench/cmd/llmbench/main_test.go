package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCommandRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "-model is required"},
		{[]string{"-batches", "1,0", "-quick"}, "-batches \"1,0\""},
		{[]string{"-model", "/tmp/x", "extra"}, "unexpected argument"},
		{[]string{"-nope"}, "flag provided but not defined"},
		{[]string{"-quick", "-gguf", "q4_k,q9"}, "-gguf:"},
		{[]string{"-quick", "-bf16=false"}, "-bf16=false measures only the -gguf models"},
		{[]string{"-quick", "-constrain", "xml"}, "want schema, json_object or @FILE"},
		{[]string{"-quick", "-constrain", "@/nonexistent/schema.json"}, "-constrain: open /nonexistent/schema.json"},
		{[]string{"-quick", "-prefix-suffix", "0"}, "-prefix-suffix 0: want at least 1"},
		{[]string{"-quick", "-speculative", "-1"}, "-speculative -1: want 0"},
		{[]string{"-tensor-parallel", "1,x"}, "-tensor-parallel"},
	} {
		var out, errs strings.Builder
		assert.Equal(t, 2, run(c.args, &out, &errs), c.args)
		assert.Contains(t, errs.String(), c.msg, c.args)
	}
	var errs strings.Builder
	assert.Equal(t, 0, run([]string{"-h"}, &errs, &errs))
	assert.Contains(t, errs.String(), "usage: llmbench")
}
