// Package yamlcheck bounds a YAML document's size and nesting before a
// YAML library sees it: goccy/go-yaml takes time and memory quadratic in
// the nesting depth (100,000 nested "[" in 200 KB took 42 s and 15 GB), and
// tapml's YAML files (pipelines, manifests, tolerance overrides) are never
// more than a few levels deep.
//
// The scan is deliberately coarse and linear: it counts flow brackets ("["
// and "{") outside quotes and comments, compact block indicators ("- - -")
// at the start of a line, and indentation. It may overcount (a bracket in a
// plain scalar), never undercount, so the bounds are set far above what
// real files use.
package yamlcheck

import "fmt"

const (
	// MaxDepth bounds flow brackets plus compact indicators open at once.
	MaxDepth = 64
	// MaxIndent bounds a line's indentation, in columns.
	MaxIndent = 256
)

// Error is a document over a bound.
type Error struct {
	File string
	Line int // 0 for the size
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Check returns an *Error naming file when data is longer than maxBytes or
// nests deeper than MaxDepth or MaxIndent.
func Check(file string, data []byte, maxBytes int) error {
	if len(data) > maxBytes {
		return &Error{File: file, Msg: fmt.Sprintf("%d bytes, more than the %d a YAML file here may have", len(data), maxBytes)}
	}
	line, flow := 1, 0
	atLineStart := true // only spaces and compact indicators seen on this line
	indent, compact := 0, 0
	var quote byte // the open quote, or 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line++
			atLineStart, indent, compact = true, 0, 0
			continue // a quoted scalar may span lines: quote stays open
		}
		if quote != 0 {
			switch {
			case quote == '"' && c == '\\':
				i++ // skip the escaped byte
			case c == quote:
				quote = 0
			}
			continue
		}
		if atLineStart {
			switch {
			case c == ' ':
				indent++
				if indent > MaxIndent {
					return &Error{File: file, Line: line, Msg: fmt.Sprintf("indented more than %d columns: too deeply nested", MaxIndent)}
				}
				continue
			case (c == '-' || c == '?' || c == ':') && i+1 < len(data) && (data[i+1] == ' ' || data[i+1] == '\n'):
				compact++
				if flow+compact > MaxDepth {
					return deep(file, line)
				}
				continue
			}
			atLineStart = false
		}
		switch c {
		case '#':
			if i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n' {
				for i+1 < len(data) && data[i+1] != '\n' {
					i++
				}
			}
		case '\'', '"':
			if i == 0 || isSeparator(data[i-1]) {
				quote = c
			}
		case '[', '{':
			flow++
			if flow+compact > MaxDepth {
				return deep(file, line)
			}
		case ']', '}':
			if flow > 0 {
				flow--
			}
		}
	}
	return nil
}

func deep(file string, line int) error {
	return &Error{File: file, Line: line, Msg: fmt.Sprintf("nested more than %d levels deep", MaxDepth)}
}

// isSeparator reports whether a quote after c opens a quoted scalar.
func isSeparator(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '[', '{', ',', ':', '-', '?':
		return true
	}
	return false
}
