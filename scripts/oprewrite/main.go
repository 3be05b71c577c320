// Command oprewrite turns op names written as string literals into ir's
// typed op constants ("matmul" -> ir.OpMatmul). It did the mechanical part
// of making ir.Op a typed identity and is kept so that the rewrite can be
// re-applied to code written meanwhile against the string form.
//
// Re-applying it to code that compares, switches on or passes op names as
// strings (run from this folder):
//
//	go run . -C ../.. fix ./...       // literals that a type error about ir.Op points at
//	go run . -C ../.. errors ./...    // what is left: every type error, tests included
//
// fix rewrites the literals a type error points at ("cannot use "matmul"
// (untyped string constant) as ir.Op value", a switch case, a comparison
// with an ir.Op); what it cannot know is left to a person: a variable, field,
// parameter or map key type declared string that holds ops must become
// ir.Op (then run fix again), and an ir.Op used where a string is expected
// needs .String() (stringify adds it where the value is a plain name).
//
// The original rewrite ran in two steps: with ir.Op declared as a string
// type and the types above changed by hand until the tree compiled,
//
//	go run . -C ../.. literals ./...  // every literal whose type is ir.Op
//
// then ir.Op became an integer type.
//
// It lives in its own module (it needs golang.org/x/tools) so tapml's own
// build never sees it. Offline: GOFLAGS=-mod=mod GOPROXY=off.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/packages"
)

const irPath = "github.com/tapml/tapml/ir"

func main() {
	dir := flag.String("C", ".", "the tapml checkout")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: oprewrite [-C dir] fix|stringify|errors|literals [packages]")
		os.Exit(2)
	}
	mode, patterns := flag.Arg(0), flag.Args()[1:]
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	switch mode {
	case "errors":
		pkgs := load(*dir, patterns)
		for _, e := range typeErrors(pkgs) {
			fmt.Println(e)
		}
	case "literals":
		pkgs := load(*dir, patterns)
		knownOps(pkgs)
		apply(collectTyped(pkgs))
	case "stringify":
		stringify(load(*dir, patterns))
	case "fix":
		// Each round fixes the lines the type checker complains about;
		// a fixed package lets its dependents be checked fully next round.
		for round := 0; round < 10; round++ {
			edits := collectFromErrors(load(*dir, patterns))
			if len(edits) == 0 {
				break
			}
			apply(edits)
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		os.Exit(2)
	}
}

func load(dir string, patterns []string) []*packages.Package {
	cfg := &packages.Config{Dir: dir, Tests: true,
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedImports | packages.NeedDeps}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return pkgs
}

type errPos struct {
	file string
	line int
	msg  string
}

func typeErrors(pkgs []*packages.Package) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pkgs {
		for _, e := range p.TypeErrors {
			s := e.Error()
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// constName is the Go name of the constant for the op named s.
func constName(s string) string {
	if s == "" {
		return "OpNone"
	}
	var b strings.Builder
	b.WriteString("Op")
	for _, part := range strings.Split(s, "_") {
		switch {
		case part == "rms" || part == "kv":
			b.WriteString(strings.ToUpper(part))
		case part != "":
			suffix := ""
			if strings.HasSuffix(part, "2d") {
				part, suffix = strings.TrimSuffix(part, "2d"), "2D"
			}
			b.WriteString(strings.ToUpper(part[:1]) + part[1:] + suffix)
		}
	}
	return b.String()
}

// An edit replaces the literal at [off, end) of file with a constant.
type edit struct {
	file     string
	off, end int
	name     string // constant name without package qualifier
}

func isOpType(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Op" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == irPath
}

// collectTyped finds string literals whose type (after implicit
// conversion) is ir.Op.
func collectTyped(pkgs []*packages.Package) map[string][]edit {
	edits := map[string][]edit{}
	seen := map[string]bool{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				tv, ok := p.TypesInfo.Types[lit]
				if !ok || !isOpType(tv.Type) || p.PkgPath == irPath && strings.HasSuffix(p.Fset.Position(lit.Pos()).Filename, "/ir/op.go") {
					return true
				}
				if v, err := strconv.Unquote(lit.Value); err != nil || !opNames[constName(v)] {
					fmt.Fprintf(os.Stderr, "%s: %s is not an op's name; left as it is\n", p.Fset.Position(lit.Pos()), lit.Value)
					return true
				}
				addEdit(p.Fset, lit, edits, seen)
				return true
			})
		}
	})
	return edits
}

func addEdit(fset *token.FileSet, lit *ast.BasicLit, edits map[string][]edit, seen map[string]bool) {
	pos := fset.Position(lit.Pos())
	key := fmt.Sprintf("%s:%d", pos.Filename, pos.Offset)
	if seen[key] {
		return
	}
	seen[key] = true
	v, err := strconv.Unquote(lit.Value)
	if err != nil {
		return
	}
	edits[pos.Filename] = append(edits[pos.Filename], edit{file: pos.Filename, off: pos.Offset, end: pos.Offset + len(lit.Value), name: constName(v)})
}

// opNames are the names of the registered ops, read from ir's constants
// (by the string values they had when ir.Op was a string type) or, once
// ir.Op is an integer, from the names the constants' identifiers spell.
var opNames = map[string]bool{}

func knownOps(pkgs []*packages.Package) {
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		if p.PkgPath != irPath || p.Types == nil {
			return
		}
		sc := p.Types.Scope()
		for _, name := range sc.Names() {
			if c, ok := sc.Lookup(name).(*types.Const); ok && isOpType(c.Type()) {
				opNames[name] = true
				if c.Val().Kind() == constant.String && name != "OpNone" {
					opNames[constName(constant.StringVal(c.Val()))] = true
				}
			}
		}
	})
}

// collectFromErrors finds the op-name string literals that type errors
// point at: an untyped string used as an ir.Op ("cannot use"), converted to
// its underlying type (a switch case), or compared with one (the literal
// operands of the comparison the error is at).
func collectFromErrors(pkgs []*packages.Package) map[string][]edit {
	knownOps(pkgs)
	at := map[string]map[int]bool{} // file -> offsets of errors
	for _, p := range pkgs {
		for _, e := range p.TypeErrors {
			m := e.Msg
			if !strings.Contains(m, "untyped string") ||
				!(strings.Contains(m, "Op") || strings.Contains(m, "to type uint8")) {
				continue
			}
			pos := e.Fset.Position(e.Pos)
			if at[pos.Filename] == nil {
				at[pos.Filename] = map[int]bool{}
			}
			at[pos.Filename][pos.Offset] = true
		}
	}
	edits := map[string][]edit{}
	seen := map[string]bool{}
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, f := range p.Syntax {
			offs := at[p.Fset.Position(f.Pos()).Filename]
			if offs == nil {
				continue
			}
			isErr := func(n ast.Node) bool { return offs[p.Fset.Position(n.Pos()).Offset] }
			try := func(x ast.Expr) {
				lit, ok := x.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return
				}
				if v, err := strconv.Unquote(lit.Value); err == nil && opNames[constName(v)] {
					addEdit(p.Fset, lit, edits, seen)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if isErr(n) {
						try(n)
					}
				case *ast.BinaryExpr:
					if isErr(n) && (n.Op == token.EQL || n.Op == token.NEQ) {
						try(n.X)
						try(n.Y)
					}
				}
				return true
			})
		}
	})
	return edits
}

// apply rewrites each file, qualifying the constants with the name the file
// imports ir under (adding the import where it is missing).
func apply(edits map[string][]edit) {
	for file, es := range edits {
		src, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, parser.ImportsOnly)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		qual, needImport := "", false
		if f.Name.Name != "ir" || !strings.HasSuffix(file, "/ir/"+baseName(file)) {
			qual, needImport = "ir.", true
			for _, im := range f.Imports {
				if p, _ := strconv.Unquote(im.Path.Value); p == irPath {
					needImport = false
					if im.Name != nil {
						qual = im.Name.Name + "."
					}
				}
			}
		}
		sort.Slice(es, func(i, j int) bool { return es[i].off > es[j].off })
		for _, e := range es {
			src = append(src[:e.off], append([]byte(qual+e.name), src[e.end:]...)...)
		}
		if needImport {
			fset = token.NewFileSet()
			f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			astutil.AddImport(fset, f, irPath)
			var b bytes.Buffer
			if err := format.Node(&b, fset, f); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			src = b.Bytes()
		}
		if formatted, err := format.Source(src); err == nil {
			src = formatted // realigns map literals and struct fields
		}
		if err := os.WriteFile(file, src, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d literal(s)\n", file, len(es))
	}
}

func baseName(p string) string { return p[strings.LastIndex(p, "/")+1:] }

// stringify appends .String() to ir.Op values used where a string is
// expected in an argument or a struct field (a name in a message, a
// report's field).
func stringify(pkgs []*packages.Package) {
	done := map[string]bool{}
	byFile := map[string][]int{}
	for _, p := range pkgs {
		for _, e := range p.TypeErrors {
			m := e.Msg
			if !strings.HasPrefix(m, "cannot use ") || !strings.Contains(m, "type ir.Op) as string value in ") &&
				!strings.Contains(m, `type "github.com/tapml/tapml/ir".Op) as string value in `) {
				continue
			}
			if !strings.Contains(m, "in argument to") && !strings.Contains(m, "in struct literal") {
				continue
			}
			expr := strings.TrimPrefix(m, "cannot use ")
			expr = expr[:strings.Index(expr, " (")]
			if strings.ContainsAny(expr, " ()") {
				continue // not a plain name or field: left to a person
			}
			pos := e.Fset.Position(e.Pos)
			key := fmt.Sprintf("%s:%d", pos.Filename, pos.Offset)
			if done[key] {
				continue
			}
			done[key] = true
			src, err := os.ReadFile(pos.Filename)
			if err != nil || !bytes.HasPrefix(src[pos.Offset:], []byte(expr)) {
				fmt.Fprintf(os.Stderr, "%s: %q not found\n", pos, expr)
				continue
			}
			byFile[pos.Filename] = append(byFile[pos.Filename], pos.Offset+len(expr))
		}
	}
	for file, offs := range byFile {
		src, _ := os.ReadFile(file)
		sort.Sort(sort.Reverse(sort.IntSlice(offs)))
		for _, off := range offs {
			src = append(src[:off], append([]byte(".String()"), src[off:]...)...)
		}
		if err := os.WriteFile(file, src, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d .String()\n", file, len(offs))
	}
}
