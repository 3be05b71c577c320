package wgsl

import (
	"fmt"
	"strings"

	"github.com/tapml/tapml/ir"
)

// f16 compute (Options.Compute = ir.F16) stores every float tensor a
// kernel binds as f16 while the kernel computes in f32: the generators
// write their kernels once, over f32 buffers, and bind declares each float
// buffer as array<f16> (or vecN<f16>) instead; Generate then rewrites
// every access to such a buffer: a load x[i] becomes f32(x[i]), a store
// x[i] = v becomes x[i] = f16(v), and x[i] op= v becomes
// x[i] = f16(f32(x[i]) op (v)); vectors convert component by component
// (the dialect converts scalars only). So arithmetic, workgroup memory and
// accumulators stay f32 (the accumulation the policy asks for), each
// output is rounded to f16 once, when it is stored — what the CPU
// reference's f16 emulation does to each op's output — and there is no
// second copy of any kernel. Accumulators that should be f16 instead
// (Options.Accumulate) are the generators' own choice (accType).

// halfElem returns the f16 element type that replaces a float binding's
// element type elem, or "" when elem is not a float type.
func halfElem(elem string) string {
	switch elem {
	case "f32":
		return "f16"
	case "vec2<f32>", "vec3<f32>", "vec4<f32>":
		return strings.Replace(elem, "f32", "f16", 1)
	}
	return ""
}

// halfStorage rewrites the accesses of src to the f16 buffers in halfs
// (name to its element type as the generator wrote it, f32 or vecN<f32>)
// and enables f16.
func halfStorage(src string, halfs map[string]string) (string, error) {
	var b strings.Builder
	if err := rewriteHalf(&b, src, halfs, new(int)); err != nil {
		return "", err
	}
	out := b.String()
	for n := 2; n <= 4; n++ {
		if name := widenFn(n); strings.Contains(out, name+"(") {
			out += fmt.Sprintf("fn %s(v: vec%d<f16>) -> vec%d<f32> { return %s; }\n", name, n, n, convert(fmt.Sprintf("vec%d<f32>", n), "v"))
		}
	}
	return "enable f16;\n" + out, nil
}

// widenFn is the helper that widens a vecN<f16> to vecN<f32>: a load of a
// vector from an f16 buffer passes through it, so the vector is loaded
// once (spelled component by component in place, each component would be
// a load of its own, which NVIDIA's compiler keeps as scalar loads: the
// Q4_0 GEMV ran 3x slower under f16 compute that way).
func widenFn(n int) string { return fmt.Sprintf("f16_widen%d", n) }

// widen is the f32 value (of type elem) of the f16 access x.
func widen(elem, x string) string {
	if strings.HasPrefix(elem, "vec") {
		return widenFn(int(elem[3]-'0')) + "(" + x + ")"
	}
	return convert(elem, x)
}

// rewriteHalf writes src to b with each access to a buffer of halfs
// converted (see above).
func rewriteHalf(b *strings.Builder, src string, halfs map[string]string, stores *int) error {
	for i := 0; i < len(src); {
		name, elem, ok := halfAccessAt(src, i, halfs)
		if !ok {
			b.WriteByte(src[i])
			i++
			continue
		}
		open := i + len(name)
		close, err := matching(src, open)
		if err != nil {
			return err
		}
		var idx strings.Builder
		if err := rewriteHalf(&idx, src[open+1:close], halfs, stores); err != nil {
			return err
		}
		access := name + "[" + idx.String() + "]"
		half := halfElem(elem)
		j := close + 1
		for j < len(src) && src[j] == ' ' {
			j++
		}
		op, isStore := assignOp(src[j:])
		if !isStore {
			b.WriteString(widen(elem, access))
			i = close + 1
			continue
		}
		start := j + len(op) + 1 // past "=" or "op="
		end := strings.IndexByte(src[start:], ';')
		if end < 0 {
			return fmt.Errorf("internal: no ';' after the store to %s", name)
		}
		end += start
		var rhs strings.Builder
		if err := rewriteHalf(&rhs, strings.TrimSpace(src[start:end]), halfs, stores); err != nil {
			return err
		}
		v := rhs.String()
		if op != "" {
			v = fmt.Sprintf("%s %s (%s)", widen(elem, access), op, v)
		}
		if half == "f16" {
			fmt.Fprintf(b, "%s = f16(%s)", access, v)
		} else {
			// The dialect converts scalars only: convert a vector by
			// components, of a value computed once.
			*stores++
			tmp := fmt.Sprintf("hv%d_", *stores)
			fmt.Fprintf(b, "{ let %s = %s; %s = %s; }", tmp, v, access, convert(half, tmp))
			end++ // the block ends the statement: drop its ';'
		}
		i = end
	}
	return nil
}

// convert converts a scalar or vector value x to the type to (f32, f16,
// vecN<f32>, vecN<f16>): vectors component by component, as the dialect
// converts scalars only.
func convert(to, x string) string {
	scalar, n := to, 1
	if strings.HasPrefix(to, "vec") {
		n = int(to[3] - '0')
		scalar = to[5 : len(to)-1]
	}
	if n == 1 {
		return scalar + "(" + x + ")"
	}
	parts := make([]string, n)
	for c := range parts {
		parts[c] = fmt.Sprintf("%s(%s.%c)", scalar, x, "xyzw"[c])
	}
	return to + "(" + strings.Join(parts, ", ") + ")"
}

// halfAccessAt reports whether an access to one of halfs (NAME[) starts at
// src[i], at an identifier boundary.
func halfAccessAt(src string, i int, halfs map[string]string) (string, string, bool) {
	if i > 0 && isIdentByte(src[i-1]) {
		return "", "", false
	}
	for name, elem := range halfs {
		if strings.HasPrefix(src[i:], name+"[") {
			return name, elem, true
		}
	}
	return "", "", false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// matching returns the index of the ']' that closes the '[' at src[open].
func matching(src string, open int) (int, error) {
	depth := 0
	for k := open; k < len(src); k++ {
		switch src[k] {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
			if depth == 0 {
				return k, nil
			}
		}
	}
	return 0, fmt.Errorf("internal: unbalanced brackets in a kernel after %q", src[max(0, open-20):open+1])
}

// assignOp recognises an assignment at the start of s: "=" gives ("",
// true), "+=" ("+", true) and so on; "==" and anything else are no store.
func assignOp(s string) (string, bool) {
	if strings.HasPrefix(s, "=") && !strings.HasPrefix(s, "==") {
		return "", true
	}
	for _, op := range []string{"+", "-", "*", "/"} {
		if strings.HasPrefix(s, op+"=") {
			return op, true
		}
	}
	return "", false
}

// accType is the WGSL type of the accumulators Options.Accumulate selects
// in the kernels that honour it (attention's scores and softmax sum).
func (g *gen) accType() string {
	if g.accumulate == ir.F16 {
		return "f16"
	}
	return "f32"
}
