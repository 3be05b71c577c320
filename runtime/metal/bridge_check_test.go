//go:build !darwin

package metal

import (
	"bytes"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tapml/tapml/internal/testenv"
)

// TestDarwinBridgeTypeChecks checks bridge_darwin.go, which only builds on
// macOS, as far as Linux allows: `go tool cgo` translates it for
// darwin/arm64 with clang-14 compiling its Objective-C (ARC) against
// stand-in SDK headers (testdata/sdk, declared from Apple's
// documentation), and go/types type-checks the translated Go with
// device.go. It catches Go and Objective-C syntax and type errors (cgo
// compiles with warnings off, so not deprecations) and a
// bridge that no longer matches the interface; not misuse of the real
// Metal API (the stand-in headers declare what the bridge uses).
func TestDarwinBridgeTypeChecks(t *testing.T) {
	clang := testenv.Tool(t, "clang-14")
	sdk, err := filepath.Abs(filepath.Join("testdata", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	// The go command passes #cgo CFLAGS to cgo; running cgo directly, the
	// test does.
	src, err := os.ReadFile("bridge_darwin.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#cgo CFLAGS:(.*)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("bridge_darwin.go has no #cgo CFLAGS line")
	}
	out := t.TempDir()
	args := append([]string{"tool", "cgo", "-objdir", out, "--", "-I" + sdk}, strings.Fields(string(m[1]))...)
	cmd := exec.Command("go", append(args, "bridge_darwin.go")...)
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=1",
		"CC="+clang+" -target arm64-apple-macos11 -nostdlibinc -I"+sdk)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go tool cgo: %v\n%s", err, msg)
	}
	// The translated files import runtime/cgo only for its Incomplete type;
	// importing it from source would run cgo on it for darwin, so a local
	// struct stands in.
	gotypes, err := os.ReadFile(filepath.Join(out, "_cgo_gotypes.go"))
	if err != nil {
		t.Fatal(err)
	}
	gotypes = regexp.MustCompile(`(?m)^import _cgopackage "runtime/cgo"$`).ReplaceAll(gotypes, nil)
	gotypes = bytes.ReplaceAll(gotypes, []byte("_cgopackage.Incomplete"), []byte("struct{}"))

	saved := build.Default
	defer func() { build.Default = saved }()
	build.Default.GOOS, build.Default.GOARCH, build.Default.CgoEnabled = "darwin", "arm64", false
	fset := token.NewFileSet()
	var files []*ast.File
	for _, f := range []struct {
		name string
		src  any
	}{
		{"device.go", nil},
		{filepath.Join(out, "bridge_darwin.cgo1.go"), nil},
		{"_cgo_gotypes.go", gotypes},
	} {
		pf, err := parser.ParseFile(fset, f.name, f.src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, pf)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil), Error: func(err error) { t.Error(err) }}
	pkg, err := conf.Check("github.com/tapml/tapml/runtime/metal", fset, files, nil)
	if err != nil {
		return // reported by Error
	}
	// Open is the darwin Open, and cgoBridge implements bridge.
	br := pkg.Scope().Lookup("bridge").Type().Underlying().(*types.Interface)
	cb := pkg.Scope().Lookup("cgoBridge")
	if cb == nil || !types.Implements(types.NewPointer(cb.Type()), br) {
		t.Error("*cgoBridge does not implement bridge")
	}
	if pkg.Scope().Lookup("Open") == nil {
		t.Error("the darwin build has no Open")
	}
}
