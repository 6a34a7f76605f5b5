package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// GPT-2's byte-level alphabet: every byte is shown as a printable
// character, so that byte-level BPE vocabularies are valid JSON strings.
// Printable Latin-1 bytes stand for themselves; the others are shifted to
// U+0100 onwards, in byte order.
var (
	byteChar   [256]string // byte -> its character, UTF-8 encoded
	charByte   [512]int16  // character (< 512) -> byte, or -1
	byteTokens [256]string // byte -> "<0xNN>", SentencePiece's byte fallback token
)

func init() {
	for i := range charByte {
		charByte[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if !printable {
			r = rune(256 + n)
			n++
		}
		byteChar[b] = string(r)
		charByte[r] = int16(b)
		byteTokens[b] = "<0x" + strings.ToUpper(hex2(byte(b))) + ">"
	}
}

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// byteLevel maps every byte of s to its byte-level character.
func byteLevel(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteString(byteChar[s[i]])
	}
	return sb.String()
}

// byteFallbackValue reports whether tok is a byte fallback token "<0xNN>"
// and its byte, parsing it as the Rust library does (two hex digits of
// either case).
func byteFallbackValue(tok string) (byte, bool) {
	if len(tok) != 6 || tok[:3] != "<0x" || tok[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexDigit(tok[3])
	lo, ok2 := hexDigit(tok[4])
	if !ok1 || !ok2 {
		return 0, false
	}
	return hi<<4 | lo, true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// lossyString returns s with each maximal ill-formed subsequence replaced
// by one U+FFFD, as Rust's String::from_utf8_lossy does (Go's
// strings.ToValidUTF8 would fold a run of them into one, and
// utf8.DecodeRune splits them byte by byte). Valid s is returned as it is,
// without a copy: the stream decoder calls this once or twice a token.
func lossyString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			sb.WriteByte(c)
			i++
			continue
		}
		n := validPrefix(s[i:])
		if n > 0 {
			sb.WriteString(s[i : i+n])
			i += n
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += -n
	}
	return sb.String()
}

// validPrefix looks at the sequence that starts b (b[0] >= 0x80): it
// returns its length if it is one well-formed character, else minus the
// length of the maximal ill-formed subpart (at least 1).
func validPrefix(b string) int {
	c := b[0]
	var size int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		size = 2
	case c == 0xE0:
		size, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		size = 3
	case c == 0xED:
		size, hi = 3, 0x9F
	case c == 0xF0:
		size, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		size = 4
	case c == 0xF4:
		size, hi = 4, 0x8F
	default:
		return -1
	}
	for k := 1; k < size; k++ {
		if k >= len(b) {
			return -k
		}
		x := b[k]
		if k == 1 {
			if x < lo || x > hi {
				return -1
			}
		} else if x < 0x80 || x > 0xBF {
			return -k
		}
	}
	return size
}

// incompleteTail reports whether s ends with the start of a multi-byte
// character that more bytes could complete.
func incompleteTail(s string) bool {
	for k := 1; k <= 3 && k <= len(s); k++ {
		c := s[len(s)-k]
		if c < 0x80 {
			return false
		}
		if c >= 0xC0 { // a lead byte: is it short of its continuation bytes?
			n := validPrefix(s[len(s)-k:])
			return n == -k && k < leadSize(c)
		}
	}
	return false
}

func leadSize(c byte) int {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2
	case c >= 0xE0 && c <= 0xEF:
		return 3
	case c >= 0xF0 && c <= 0xF4:
		return 4
	}
	return 1
}
