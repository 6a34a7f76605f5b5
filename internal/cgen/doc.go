package cgen

// The header comments that document enumerators and macros.

import (
	"os"
	"strings"
)

// docAt returns the header comment documenting the declaration at file:line:
// a trailing ///<, /**<, /*!< or //!< comment with its continuation lines,
// else the comment block right above.
func (p *parser) docAt(file string, line int) string {
	lines, ok := p.lines[file]
	if !ok {
		b, err := os.ReadFile(file)
		if err == nil {
			lines = strings.Split(string(b), "\n")
		}
		p.lines[file] = lines
	}
	if line < 1 || line > len(lines) {
		return ""
	}
	var parts []string
	if c, ok := trailingDoc(lines[line-1]); ok {
		parts = append(parts, c)
		for i := line; i < len(lines); i++ {
			t := strings.TrimSpace(lines[i])
			c, ok := trailingDoc(t)
			if !ok || !startsWithDocMarker(t) {
				break
			}
			parts = append(parts, c)
		}
		return clean(strings.Join(parts, " "))
	}
	// The comment block above, if it ends right above the line.
	for i := line - 2; i >= 0; i-- {
		t := strings.TrimSpace(lines[i])
		if startsWithDocMarker(t) || t == "" {
			break
		}
		switch {
		case strings.HasPrefix(t, "//"):
			parts = append([]string{strings.TrimLeft(t, "/! ")}, parts...)
			continue
		case strings.HasSuffix(t, "*/"):
			for ; i >= 0; i-- {
				t := strings.TrimSpace(lines[i])
				parts = append([]string{t}, parts...)
				if strings.HasPrefix(t, "/*") {
					break
				}
			}
		}
		break
	}
	return clean(strings.Join(parts, " "))
}

var docMarkers = []string{"///<", "/**<", "/*!<", "//!<"}

func startsWithDocMarker(t string) bool {
	for _, m := range docMarkers {
		if strings.HasPrefix(t, m) {
			return true
		}
	}
	return false
}

func trailingDoc(s string) (string, bool) {
	for _, m := range docMarkers {
		if i := strings.Index(s, m); i >= 0 {
			c := s[i+len(m):]
			if j := strings.Index(c, "*/"); j >= 0 {
				c = c[:j]
			}
			return c, true
		}
	}
	return "", false
}

// clean strips comment punctuation and doxygen noise and folds spaces.
func clean(s string) string {
	r := strings.NewReplacer("/**", " ", "/*!", " ", "/*", " ", "*/", " ", "///", " ", "//", " ", " * ", " ", "@brief", " ", "\\brief", " ", "\t", " ")
	s = r.Replace(s)
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimPrefix(s, "* ")
	return strings.TrimSpace(s)
}
