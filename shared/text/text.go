// Package text holds the rules for the text users and admins write that
// others read: names, titles, categories, descriptions and review bodies.
// Characters that make text display other than it reads are refused: control
// characters (a NUL, an escape, a newline in a name) and the bidirectional
// embeddings, overrides and isolates, with which "gpj.exe" can be shown as
// "exe.jpg" in a product name or a review.
package text

import "unicode"

// Line says what is wrong with s as one line of text (a name, a title, a
// category): "" when nothing is.
func Line(s string) string {
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Cc, r):
			return "holds a control character"
		case r == '\u2028' || r == '\u2029':
			return "holds a line or paragraph separator"
		case bidiControl(r):
			return "holds a bidirectional control character"
		}
	}
	return ""
}

// Block says what is wrong with s as free text (a description, a review's
// body): lines and tabs are fine, other control characters are not.
func Block(s string) string {
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
		case unicode.Is(unicode.Cc, r):
			return "holds a control character"
		case bidiControl(r):
			return "holds a bidirectional control character"
		}
	}
	return ""
}

// bidiControl reports the embeddings and overrides (U+202A to U+202E) and
// the isolates (U+2066 to U+2069) of Unicode's bidirectional algorithm
// (UAX #9); the marks (U+200E, U+200F) change no order and are allowed.
func bidiControl(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}
