package device

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/tapml/tapml/runtime/remote/proto"
)

// MaxNesting bounds the bracket nesting of a kernel: naga's parser recurses
// per level and overflows its stack on a few thousand (8 KB of "(" crashed
// the server), while tapml's kernels nest a dozen levels at most.
const MaxNesting = 64

// CheckKernel is the device's check of a kernel's WGSL before any compiler
// sees it: wgpu aborts the process on source or an entry point that is not
// UTF-8 (a Rust panic that Go cannot recover), and naga overflows its stack
// on deep nesting. It checks the size, UTF-8, that there are no control
// characters but tab, newline and carriage return (a NUL would cut the C
// string), that the entry point is an identifier declared as "fn ENTRY",
// and the nesting depth of (), [] and {} outside comments.
//
// The lead will switch its body to tapml's own WGSL front end (parse and
// type check, with these bounds); callers depend only on this signature.
func CheckKernel(src []byte, entry string) error {
	if len(src) == 0 || len(src) > proto.MaxSource {
		return fmt.Errorf("kernel source of %d bytes: want 1 to %d", len(src), proto.MaxSource)
	}
	if !isIdent(entry) {
		return fmt.Errorf("entry point %q is not a WGSL identifier", entry)
	}
	if !utf8.Valid(src) {
		return fmt.Errorf("kernel source is not valid UTF-8 (byte %d)", invalidAt(src))
	}
	depth, line := 0, 1
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			line++
		case c < 0x20 && c != '\t' && c != '\r', c == 0x7f:
			return fmt.Errorf("kernel source line %d: control character %#02x", line, c)
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i+1 < len(src) && src[i+1] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return fmt.Errorf("kernel source line %d: unterminated block comment", line)
			}
			line += bytes.Count(src[i:i+2+end], []byte("\n"))
			i += end + 3
		case c == '(' || c == '[' || c == '{':
			depth++
			if depth > MaxNesting {
				return fmt.Errorf("kernel source line %d: brackets nested more than %d deep", line, MaxNesting)
			}
		case c == ')' || c == ']' || c == '}':
			depth--
			if depth < 0 {
				return fmt.Errorf("kernel source line %d: unbalanced %q", line, c)
			}
		}
	}
	if !declares(src, entry) {
		return fmt.Errorf("kernel source has no function %q (the entry point)", entry)
	}
	return nil
}

func isIdent(s string) bool {
	if s == "" || len(s) > proto.MaxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != "_"
}

// declares reports whether src has "fn ENTRY" followed by "(" (spaces
// allowed between).
func declares(src []byte, entry string) bool {
	for rest := src; ; {
		i := bytes.Index(rest, []byte("fn"))
		if i < 0 {
			return false
		}
		before := i == 0 || !isIdentByte(rest[i-1])
		after := bytes.TrimLeft(rest[i+2:], " \t\r\n")
		if before && len(after) < len(rest[i+2:]) && bytes.HasPrefix(after, []byte(entry)) {
			tail := bytes.TrimLeft(after[len(entry):], " \t\r\n")
			if len(tail) > 0 && tail[0] == '(' {
				return true
			}
		}
		rest = rest[i+2:]
	}
}

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
