package text

import "testing"

func TestLineAndBlock(t *testing.T) {
	for _, tc := range []struct {
		name, s     string
		line, block bool // acceptable as a line, as a block
	}{
		{"plain", "Copper Kettle", true, true},
		{"accents and emoji", "Crème brûlée 🍮 👩‍🍳", true, true},
		{"right to left", "קומקום נחושת", true, true},
		{"a mark", "abc\u200Fdef", true, true},
		{"a newline", "two\nlines", false, true},
		{"a tab", "a\tb", false, true},
		{"a carriage return", "a\r\nb", false, true},
		{"line separator", "two\u2028lines", false, true},
		{"paragraph separator", "two\u2029paragraphs", false, true},
		{"NUL", "a\x00b", false, false},
		{"escape", "a\x1b[31mred", false, false},
		{"DEL", "a\x7fb", false, false},
		{"C1 control", "a\u0085b", false, false},
		{"right-to-left override", "invoice\u202Egpj.exe", false, false},
		{"left-to-right embedding", "a\u202Ab", false, false},
		{"first strong isolate", "a\u2068b\u2069", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.s) == ""; got != tc.line {
				t.Errorf("Line(%q) accepted: %v, want %v (%q)", tc.s, got, tc.line, Line(tc.s))
			}
			if got := Block(tc.s) == ""; got != tc.block {
				t.Errorf("Block(%q) accepted: %v, want %v (%q)", tc.s, got, tc.block, Block(tc.s))
			}
		})
	}
}
