// Package termtext reads a serial console log as a terminal shows it.
//
// A BIOS's serial console redirection (SeaBIOS's sercon, a BMC's SOL)
// turns screen writes into a terminal stream: text, carriage returns and
// cursor moves. When it resynchronises its cursor in the middle of a line
// the bytes no longer hold the line as written ("i\r\x1b[05;02Hngot" is
// "ingot" on the screen), so a search for text written to the screen must
// search the rendered lines, not the bytes.
package termtext

import (
	"strconv"
	"strings"
)

// Lines renders b line by line: printable bytes overwrite the current line
// at the cursor's column, '\r' returns to column 0, '\n' starts a new
// line, backspace steps back, ESC [ row ; col H (and f) moves to col on the
// current line (its row is not followed: a log has no screen to scroll),
// and every other escape sequence (colours, modes, ESC c, clears) is
// dropped.
func Lines(b []byte) string {
	var out strings.Builder
	var line []byte
	col := 0
	put := func(c byte) {
		for len(line) < col {
			line = append(line, ' ')
		}
		if col < len(line) {
			line[col] = c
		} else {
			line = append(line, c)
		}
		col++
	}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '\n':
			out.Write(line)
			out.WriteByte('\n')
			line, col = line[:0], 0
		case c == '\r':
			col = 0
		case c == '\b':
			col = max(0, col-1)
		case c == 0x1b:
			i = escape(b, i, &col)
		case c == '\t' || c >= 0x20:
			put(c)
		}
	}
	out.Write(line)
	return out.String()
}

// escape skips the escape sequence at b[i] (ESC), applying a cursor
// position's column, and returns the index of its last byte.
func escape(b []byte, i int, col *int) int {
	if i+1 >= len(b) || b[i+1] != '[' {
		return min(i+1, len(b)-1) // ESC c and other two-byte sequences
	}
	j := i + 2
	for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == ';' || b[j] == '?') {
		j++
	}
	if j >= len(b) {
		return len(b) - 1
	}
	if b[j] == 'H' || b[j] == 'f' {
		c := 1
		if _, s, ok := strings.Cut(string(b[i+2:j]), ";"); ok {
			if n, err := strconv.Atoi(s); err == nil {
				c = min(n, maxCol)
			}
		}
		*col = max(0, c-1)
	}
	return j
}

// maxCol bounds a cursor move's column: a damaged log cannot make a line
// longer than this.
const maxCol = 1000
