// Package kernelcheck checks HIP C++ kernel sources, for the tests of the
// packages that embed them.
package kernelcheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var defineRE = regexp.MustCompile(`(?m)^\s*#define\s+(\w+)(\([^)]*\))?\s+(.*)$`)

// NotWaiting returns how many kernel definitions src (a HIP C++ source)
// has and each whose body does not begin with one of waits: the statements a source's
// kernels begin with when they are launched early
// (hip.LaunchConfig.EarlyLaunch), such as "RG_GRID_WAIT();". A kernel
// definition is __global__, or a macro defined as one (in src or in the
// headers it includes), outside #define lines and line comments; its body
// is the first brace after it. Each result is a definition up to its
// body, on one line.
func NotWaiting(src string, waits []string, headers ...string) (kernels int, missing []string) {
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
	for _, loc := range regexp.MustCompile(pattern).FindAllStringIndex(src, -1) {
		line := strings.TrimSpace(src[strings.LastIndexByte(src[:loc[0]], '\n')+1 : loc[0]])
		if strings.HasPrefix(line, "#define") || strings.HasPrefix(line, "//") {
			continue
		}
		kernels++
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
	return kernels, missing
}

// signature is a definition's text up to its body, on one line.
func signature(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\\\n", " ")), " ")
}

// callRE is a call's function name: qmatvec8k4<T, 1, false>(...) or f(...).
var callRE = regexp.MustCompile(`^(\w+)\s*[<(]`)

// NotWaitingInside returns how many kernels of src begin with marker (the
// statement that says a kernel's device function waits itself) and, for
// each whose next statement calls no function of src with wait in its
// body, the marker's line and the call: "line 981: qmatvec8k4".
func NotWaitingInside(src, marker, wait string) (marked int, missing []string) {
	for i := 0; ; {
		k := strings.Index(src[i:], marker)
		if k < 0 {
			return marked, missing
		}
		marked++
		i += k + len(marker)
		callee := "no call"
		if call := callRE.FindStringSubmatch(strings.TrimLeft(src[i:], " \t\r\n\\")); call != nil {
			if strings.Contains(functionBody(src, call[1]), wait) {
				continue
			}
			callee = call[1]
		}
		missing = append(missing, fmt.Sprintf("line %d: %s", strings.Count(src[:i], "\n")+1, callee))
	}
}

// functionBody is the body of the __device__ function name in src, or ""
// where src defines none.
func functionBody(src, name string) string {
	m := regexp.MustCompile(`__device__[^;{]*\b` + regexp.QuoteMeta(name) + `\s*\([^;{]*\{`).FindStringIndex(src)
	if m == nil {
		return ""
	}
	depth := 1
	for i := m[1]; i < len(src); i++ {
		switch src[i] {
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 {
				return src[m[1]:i]
			}
		}
	}
	return ""
}

var includeRE = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*include[ \t]+"([^"]+)"`)

// Includes follows the quoted #include lines of src through headers (a
// module's in-memory headers, by include name) and returns the headers
// it reaches, sorted, and each include that names none of them, as
// "includer: name" ("" for src), sorted.
func Includes(src string, headers map[string]string) (reached, missing []string) {
	seen := map[string]bool{}
	var walk func(from, text string)
	walk = func(from, text string) {
		for _, m := range includeRE.FindAllStringSubmatch(text, -1) {
			name := m[1]
			h, ok := headers[name]
			if !ok {
				missing = append(missing, from+": "+name)
				continue
			}
			if !seen[name] {
				seen[name] = true
				reached = append(reached, name)
				walk(name, h)
			}
		}
	}
	walk("", src)
	slices.Sort(reached)
	slices.Sort(missing)
	return reached, missing
}
