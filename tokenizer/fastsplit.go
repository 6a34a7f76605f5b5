package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The split patterns of Llama 3, Qwen2 and GPT-2 are matched by hand
// rather than by regexp2's backtracking interpreter, which is 50 times
// slower on them. Each function returns the end of the match that starts
// at s[i:] (these patterns match at every position, so the matches tile
// the text), with the regex's leftmost-first alternation and
// backtracking. The tests check them against regexp2 on random text.
const (
	llama3Split = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Split  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	gpt2Split   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// fastSplits maps a pattern to its hand-written matcher.
var fastSplits = map[string]func(s string, i int) int{
	llama3Split: func(s string, i int) int { return matchLlama3(s, i, 3) },
	qwen2Split:  func(s string, i int) int { return matchLlama3(s, i, 1) },
	gpt2Split:   matchGPT2,
}

// isSpaceRE is \s of Oniguruma and .NET: [\t\n\v\f\r \x85\p{Z}], which is
// Unicode's White_Space.
func isSpaceRE(r rune) bool {
	if r < 0x80 {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return r == 0x85 || unicode.In(r, unicode.Z)
}

func isLetter(r rune) bool {
	if r < 0x80 {
		return r|0x20 >= 'a' && r|0x20 <= 'z'
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < 0x80 {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}

func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// contraction matches 's 't 're 've 'm 'll 'd at s[i:] (fold: ASCII case
// insensitively, as regexp2 does; Oniguruma would also fold ſ to s).
func contraction(s string, i int, fold bool) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	lower := func(k int) byte {
		if k >= len(s) {
			return 0
		}
		c := s[k]
		if fold && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		return c
	}
	switch lower(i + 1) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if lower(i+2) == 'e' {
			return i + 3
		}
	case 'l':
		if lower(i+2) == 'l' {
			return i + 3
		}
	}
	return 0
}

// spaceTail handles \s*[\r\n]+ (if nl), then \s+(?!\S), then \s+, at a
// whitespace character s[i:].
func spaceTail(s string, i int, nl bool) int {
	end, lastNL, last, n := i, -1, i, 0
	for {
		r, size := runeAt(s, end)
		if size == 0 || !isSpaceRE(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end
		}
		last = end
		end += size
		n++
	}
	switch {
	case nl && lastNL >= 0:
		return lastNL + 1
	case end == len(s) || n == 1:
		return end
	}
	return last // leave the last space to the next word
}

func matchLlama3(s string, i, maxDigits int) int {
	if e := contraction(s, i, true); e > 0 {
		return e
	}
	c, size := runeAt(s, i)
	j := i + size
	if isLetter(c) {
		return letters(s, j)
	}
	if c != '\r' && c != '\n' && !isNumber(c) {
		if n, sz := runeAt(s, j); sz > 0 && isLetter(n) {
			return letters(s, j+sz)
		}
	}
	if isNumber(c) {
		for k := 1; k < maxDigits; k++ {
			n, sz := runeAt(s, j)
			if sz == 0 || !isNumber(n) {
				break
			}
			j += sz
		}
		return j
	}
	if e := punctuation(s, i, c, size); e > 0 {
		for e < len(s) && (s[e] == '\r' || s[e] == '\n') {
			e++
		}
		return e
	}
	return spaceTail(s, i, true)
}

func matchGPT2(s string, i int) int {
	if e := contraction(s, i, false); e > 0 {
		return e
	}
	c, size := runeAt(s, i)
	j := i
	if c == ' ' {
		if n, sz := runeAt(s, i+1); sz > 0 && !isSpaceRE(n) {
			c, size, j = n, sz, i+1
		}
	}
	switch {
	case isLetter(c):
		return letters(s, j+size)
	case isNumber(c):
		for k := j + size; ; {
			n, sz := runeAt(s, k)
			if sz == 0 || !isNumber(n) {
				return k
			}
			k += sz
		}
	}
	if e := punctuation(s, i, c, size); e > 0 {
		return e
	}
	return spaceTail(s, i, false)
}

// letters returns the end of the run of letters at s[j:].
func letters(s string, j int) int {
	for {
		n, sz := runeAt(s, j)
		if sz == 0 || !isLetter(n) {
			return j
		}
		j += sz
	}
}

// punctuation matches " ?[^\s\p{L}\p{N}]+" at s[i:], whose first
// character is c (size bytes); 0 if it does not match.
func punctuation(s string, i int, c rune, size int) int {
	j := i
	if s[i] == ' ' {
		j = i + 1
		c, size = runeAt(s, j)
	}
	if size == 0 || isSpaceRE(c) || isLetter(c) || isNumber(c) {
		return 0
	}
	j += size
	for {
		n, sz := runeAt(s, j)
		if sz == 0 || isSpaceRE(n) || isLetter(n) || isNumber(n) {
			return j
		}
		j += sz
	}
}
