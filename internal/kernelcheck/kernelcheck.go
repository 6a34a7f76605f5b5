// Package kernelcheck checks HIP C++ kernel sources, for the tests of the
// packages that embed them.
package kernelcheck

import (
	"regexp"
	"slices"
	"strings"
)

var defineRE = regexp.MustCompile(`(?m)^\s*#define\s+(\w+)(\([^)]*\))?\s+(.*)$`)

// NotWaiting returns each kernel definition in src (a HIP C++ source)
// whose body does not begin with one of waits: the statements a source's
// kernels begin with when they are launched early
// (hip.LaunchConfig.EarlyLaunch), such as "RG_GRID_WAIT();". A kernel
// definition is __global__, or a macro defined as one (in src or in the
// headers it includes), outside #define lines and line comments; its body
// is the first brace after it. Each result is a definition up to its
// body, on one line.
func NotWaiting(src string, waits []string, headers ...string) []string {
	kernelMacros := map[string]bool{}
	for _, h := range append(headers, src) {
		for _, m := range defineRE.FindAllStringSubmatch(h, -1) {
			if strings.Contains(m[3], "__global__") {
				kernelMacros[m[1]] = true
			}
		}
	}
	var names []string
	for n := range kernelMacros {
		names = append(names, regexp.QuoteMeta(n))
	}
	pattern := `__global__`
	if len(names) > 0 {
		pattern = `\b(` + strings.Join(names, "|") + `)\b|__global__`
	}
	var missing []string
	for _, loc := range regexp.MustCompile(pattern).FindAllStringIndex(src, -1) {
		line := strings.TrimSpace(src[strings.LastIndexByte(src[:loc[0]], '\n')+1 : loc[0]])
		if strings.HasPrefix(line, "#define") || strings.HasPrefix(line, "//") {
			continue
		}
		brace := strings.IndexByte(src[loc[1]:], '{')
		if brace < 0 {
			missing = append(missing, signature(src[loc[0]:]))
			continue
		}
		body := strings.TrimLeft(src[loc[1]+brace+1:], " \t\r\n\\")
		if !slices.ContainsFunc(waits, func(w string) bool { return strings.HasPrefix(body, w) }) {
			missing = append(missing, signature(src[loc[0]:loc[1]+brace]))
		}
	}
	return missing
}

// signature is a definition's text up to its body, on one line.
func signature(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\\\n", " ")), " ")
}
