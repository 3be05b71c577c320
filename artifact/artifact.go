// Package artifact writes and reads the build folder of `tapmlc compile`:
//
//	build/
//	  manifest.yaml         format version, model provenance, target, pipeline, kernels, checksums
//	  model.tir             the lowered IR in text form
//	  weights.safetensors   every weight of the lowered module
//	  kernels/              one file per generated kernel (none for the cpu target)
//
// Write is atomic: the folder is built beside its destination and renamed
// into place only when complete, so a failed compile leaves no half folder
// and never clobbers a good one. Load verifies the format version and every
// checksum before it returns the module.
package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/tapml/tapml/codegen"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/internal/yamlcheck"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/passes"
	"github.com/tapml/tapml/tensor/safetensors"
)

// FormatVersion is the build folder format this package writes. Load reads
// this version and older ones; a newer one is an error.
const FormatVersion = 1

// The files of a build folder.
const (
	ManifestFile = "manifest.yaml"
	ModelFile    = "model.tir"
	WeightsFile  = "weights.safetensors"
	KernelsDir   = "kernels"
)

// Manifest is manifest.yaml.
type Manifest struct {
	Format    int               `yaml:"format"`
	Tool      string            `yaml:"tool"`
	Model     Model             `yaml:"model"`
	Target    string            `yaml:"target"`
	Probed    bool              `yaml:"probed"`
	Pipeline  []passes.StepInfo `yaml:"pipeline"`
	Kernels   []Kernel          `yaml:"kernels,omitempty"`
	Tokenizer *Tokenizer        `yaml:"tokenizer,omitempty"`
	Files     []File            `yaml:"files"`
}

// Model is the provenance of the compiled model.
type Model struct {
	Name string `yaml:"name"`
	// Source is the model file or folder compiled ("builtin" or empty for
	// generated models); SHA256 is its checksum (of a folder: of the list of
	// its files' relative paths and checksums), empty when there is no file.
	Source string `yaml:"source"`
	SHA256 string `yaml:"sha256,omitempty"`
}

// File is one file of the folder with its checksum.
type File struct {
	Path   string `yaml:"path"` // slash-separated, relative to the folder
	Size   int64  `yaml:"size"`
	SHA256 string `yaml:"sha256"`
}

// Kernel records one generated kernel: its file and what a runtime needs
// to launch it.
type Kernel struct {
	File          string    `yaml:"file"`
	Func          string    `yaml:"func"`
	Node          int       `yaml:"node"`
	Op            string    `yaml:"op"`
	Language      string    `yaml:"language"`
	Entry         string    `yaml:"entry"`
	WorkgroupSize [3]int    `yaml:"workgroup_size"`
	Grid          [3]int    `yaml:"grid"`
	Bindings      []Binding `yaml:"bindings"`
}

// Binding is a codegen.Binding with its type in text form.
type Binding struct {
	Index  int    `yaml:"index"`
	Name   string `yaml:"name"`
	Access string `yaml:"access"`
	Type   string `yaml:"type"`
	Input  int    `yaml:"input"`
	Output int    `yaml:"output"`
}

// EmittedKernel is a kernel of one node of a function.
type EmittedKernel struct {
	Func   string
	Kernel *codegen.Kernel
}

// KernelEmitter generates the kernels a target needs ahead of time. The
// caller passes one for its target (see StaticEmitter), so this package
// imports no code generator.
type KernelEmitter interface {
	// Extension is the kernel files' extension ("wgsl").
	Extension() string
	// Emit returns the kernels of m.
	Emit(m *ir.Module) ([]EmittedKernel, error)
}

// Build is what Write writes.
type Build struct {
	Module   *ir.Module
	Target   string
	Source   string // the model file or folder; "" or "builtin" for generated models
	Pipeline []passes.StepInfo
	Probed   bool
	Kernels  KernelEmitter // nil: no kernels (the cpu target)
	// Tokenizer, when set, is stored so that `tapmlc run build/` needs no
	// --tokenizer.
	Tokenizer *sentencepiece.Tokenizer
}

// Write writes the build folder dir atomically and returns its manifest.
// dir may not exist yet; if it exists it must be a build folder (it has a
// manifest.yaml) or empty, and it is replaced only once the new folder is
// complete.
func Write(dir string, b Build) (*Manifest, error) {
	if b.Module == nil {
		return nil, fmt.Errorf("artifact: no module")
	}
	if err := ir.Verify(b.Module); err != nil {
		return nil, fmt.Errorf("artifact: the module does not verify: %w", err)
	}
	for _, w := range b.Module.Weights {
		if w.Source == nil {
			return nil, fmt.Errorf("artifact: weight @%s has no data attached", w.Name)
		}
	}
	dir = filepath.Clean(dir)
	if err := checkReplaceable(dir); err != nil {
		return nil, err
	}
	var man *Manifest
	err := atomicfile.WriteDir(dir, func(tmp string) (err error) {
		man, err = writeContents(tmp, b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", dir, err)
	}
	return man, nil
}

// checkReplaceable refuses to replace anything but a build folder or an
// empty folder.
func checkReplaceable(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("artifact: %s exists and is not a folder", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("artifact: refusing to replace %s: it is not empty and not a build folder (no %s)", dir, ManifestFile)
	}
	return nil
}

// hashWriter writes to a file while hashing what it writes.
type hashWriter struct {
	f    *os.File
	h    hash.Hash
	n    int64
	path string
}

func createFile(root, rel string) (*hashWriter, error) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &hashWriter{f: f, h: sha256.New(), path: rel}, nil
}

func (w *hashWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// close syncs and closes the file and returns its manifest entry.
func (w *hashWriter) close() (File, error) {
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		return File{}, err
	}
	if err := w.f.Close(); err != nil {
		return File{}, err
	}
	return File{Path: w.path, Size: w.n, SHA256: hex.EncodeToString(w.h.Sum(nil))}, nil
}

func writeFile(root, rel string, data []byte) (File, error) {
	w, err := createFile(root, rel)
	if err != nil {
		return File{}, err
	}
	if _, err := w.Write(data); err != nil {
		w.f.Close()
		return File{}, err
	}
	return w.close()
}

func writeContents(root string, b Build) (*Manifest, error) {
	m := b.Module
	man := &Manifest{
		Format:   FormatVersion,
		Tool:     "tapml",
		Model:    Model{Name: m.Name, Source: b.Source},
		Target:   b.Target,
		Probed:   b.Probed,
		Pipeline: b.Pipeline,
	}
	if b.Source != "" && b.Source != "builtin" {
		sum, err := sourceSHA256(b.Source)
		if err != nil {
			return nil, fmt.Errorf("model source: %w", err)
		}
		man.Model.SHA256 = sum
	}
	f, err := writeFile(root, ModelFile, []byte(ir.Text(m)))
	if err != nil {
		return nil, err
	}
	man.Files = append(man.Files, f)

	w, err := createFile(root, WeightsFile)
	if err != nil {
		return nil, err
	}
	entries := make([]safetensors.Entry, len(m.Weights))
	for i, wt := range m.Weights {
		wt := wt
		entries[i] = safetensors.Entry{Name: wt.Name, DType: wt.Type.DType, Shape: wt.Type.Shape.Sizes(), Data: wt.Source.Bytes}
	}
	if err := safetensors.Encode(w, entries, map[string]string{"format": "tapml", "model": m.Name}); err != nil {
		w.f.Close()
		return nil, fmt.Errorf("%s: %w", WeightsFile, err)
	}
	if f, err = w.close(); err != nil {
		return nil, err
	}
	man.Files = append(man.Files, f)

	if b.Kernels != nil {
		ks, err := b.Kernels.Emit(m)
		if err != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
		used := map[string]bool{}
		for _, ek := range ks {
			k := ek.Kernel
			if k == nil {
				return nil, fmt.Errorf("kernels: the emitter returned a nil kernel")
			}
			base := sanitize(ek.Func + "." + k.Name())
			name := base
			for i := 2; used[name]; i++ {
				name = fmt.Sprintf("%s_%d", base, i)
			}
			used[name] = true
			rel := path.Join(KernelsDir, name+"."+b.Kernels.Extension())
			f, err := writeFile(root, rel, k.Source)
			if err != nil {
				return nil, err
			}
			man.Files = append(man.Files, f)
			mk := Kernel{File: rel, Func: ek.Func, Node: k.NodeID, Op: k.Op.String(), Language: k.Language, Entry: k.Entry,
				WorkgroupSize: k.WorkgroupSize, Grid: k.Grid}
			for _, bd := range k.Bindings {
				mk.Bindings = append(mk.Bindings, Binding{Index: bd.Index, Name: bd.Name, Access: string(bd.Access),
					Type: bd.Type.String(), Input: bd.Input, Output: bd.Output})
			}
			man.Kernels = append(man.Kernels, mk)
		}
	}
	if b.Tokenizer != nil {
		f, err := writeFile(root, TokenizerFile, encodeTokenizer(b.Tokenizer))
		if err != nil {
			return nil, err
		}
		man.Files = append(man.Files, f)
		man.Tokenizer = &Tokenizer{File: TokenizerFile, Format: "llama2c", VocabSize: b.Tokenizer.VocabSize(),
			BOS: b.Tokenizer.BOS(), EOS: b.Tokenizer.EOS(), EOG: b.Tokenizer.EOG()}
	}
	sort.Slice(man.Files, func(i, j int) bool { return man.Files[i].Path < man.Files[j].Path })
	y, err := yaml.MarshalWithOptions(man, yaml.Indent(2), yaml.IndentSequence(true))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestFile, err)
	}
	header := "# tapml build folder manifest, written by `tapmlc compile`.\n" +
		"# Load checks the format version and every file's checksum: edit nothing by hand.\n"
	if _, err := writeFile(root, ManifestFile, append([]byte(header), y...)); err != nil {
		return nil, err
	}
	return man, nil
}

// sanitize keeps a file name to [A-Za-z0-9._-].
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// sourceSHA256 hashes a file, or a folder as the list of its files'
// slash-separated relative paths and checksums ("<sha256>  <path>\n" each,
// sorted by path).
func sourceSHA256(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return fileSHA256(p)
	}
	var lines []string
	err = filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		sum, err := fileSHA256(q)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(p, q)
		lines = append(lines, sum+"  "+filepath.ToSlash(rel)+"\n")
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "")))
	return hex.EncodeToString(h[:]), nil
}

func fileSHA256(p string) (string, error) {
	f, _, err := safeio.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// IsBuild reports whether dir looks like a build folder (it has a
// manifest.yaml); Load says whether it is a good one.
func IsBuild(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil && st.Mode().IsRegular()
}

// ReadManifest reads and checks dir's manifest.yaml (format version and
// fields), without checking the files.
func ReadManifest(dir string) (*Manifest, error) {
	mp := filepath.Join(dir, ManifestFile)
	data, err := safeio.ReadFile(mp, safeio.MaxManifest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: not a tapml build folder: %s is missing", dir, ManifestFile)
	}
	if err != nil {
		return nil, err
	}
	if err := yamlcheck.Check(mp, data, safeio.MaxManifest); err != nil {
		return nil, err
	}
	// The version first, so that a newer format is reported as such rather
	// than as unknown fields.
	var ver struct {
		Format *int `yaml:"format"`
	}
	if err := yaml.Unmarshal(data, &ver); err != nil {
		return nil, fmt.Errorf("%s: corrupt manifest: %v", mp, yaml.FormatError(err, false, false))
	}
	switch {
	case ver.Format == nil:
		return nil, fmt.Errorf("%s: corrupt manifest: no format version", mp)
	case *ver.Format > FormatVersion:
		return nil, fmt.Errorf("%s: build format version %d is newer than this tapmlc reads (%d); rebuild the folder with this tapmlc or upgrade tapmlc", mp, *ver.Format, FormatVersion)
	case *ver.Format < 1:
		return nil, fmt.Errorf("%s: corrupt manifest: bad format version %d", mp, *ver.Format)
	}
	var man Manifest
	if err := yaml.UnmarshalWithOptions(data, &man, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: corrupt manifest: %v", mp, yaml.FormatError(err, false, false))
	}
	for i := range man.Pipeline {
		for k, v := range man.Pipeline[i].Options {
			man.Pipeline[i].Options[k] = normalizeOption(v)
		}
	}
	seen := map[string]bool{}
	for _, f := range man.Files {
		clean := path.Clean(f.Path)
		if f.Path == "" || clean != f.Path || path.IsAbs(f.Path) || clean == "." || strings.HasPrefix(clean, "../") || clean == ".." || strings.Contains(f.Path, "\\") {
			return nil, fmt.Errorf("%s: corrupt manifest: bad file path %q", mp, f.Path)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("%s: corrupt manifest: file %s listed twice", mp, f.Path)
		}
		if len(f.SHA256) != 64 {
			return nil, fmt.Errorf("%s: corrupt manifest: file %s has a bad checksum %q", mp, f.Path, f.SHA256)
		}
		seen[f.Path] = true
	}
	for _, need := range []string{ModelFile, WeightsFile} {
		if !seen[need] {
			return nil, fmt.Errorf("%s: corrupt manifest: %s is not listed", mp, need)
		}
	}
	if man.Tokenizer != nil && !seen[man.Tokenizer.File] {
		return nil, fmt.Errorf("%s: corrupt manifest: tokenizer file %s is not listed in files", mp, man.Tokenizer.File)
	}
	for _, k := range man.Kernels {
		if !seen[k.File] {
			return nil, fmt.Errorf("%s: corrupt manifest: kernel file %s is not listed in files", mp, k.File)
		}
	}
	return &man, nil
}

// normalizeOption gives option values read from YAML the Go types passes
// use: int64 for integers, []string and []int64 for lists.
func normalizeOption(v any) any {
	switch x := v.(type) {
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x)
		}
	case int:
		return int64(x)
	case []any:
		strs, ints := []string{}, []int64{}
		for _, e := range x {
			switch y := normalizeOption(e).(type) {
			case string:
				strs = append(strs, y)
			case int64:
				ints = append(ints, y)
			default:
				return v
			}
		}
		switch {
		case len(strs) == len(x):
			return strs
		case len(ints) == len(x):
			return ints
		}
	}
	return v
}

// Verify checks every file of the manifest against its size and checksum.
func Verify(dir string, man *Manifest) error {
	for _, f := range man.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: missing (listed in %s)", p, ManifestFile)
		}
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return &safeio.NotRegularError{Path: p, Mode: st.Mode()}
		}
		if st.Size() != f.Size {
			return fmt.Errorf("%s: corrupt: %d bytes, the manifest says %d", p, st.Size(), f.Size)
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		if sum != f.SHA256 {
			return fmt.Errorf("%s: corrupt: checksum sha256:%s, the manifest says sha256:%s", p, sum, f.SHA256)
		}
	}
	return nil
}

// Load reads a build folder: it checks the manifest (format version),
// every file's checksum, parses model.tir and attaches the weights of
// weights.safetensors (read lazily, one tensor at a time).
func Load(dir string) (*ir.Module, *Manifest, error) {
	man, err := ReadManifest(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := Verify(dir, man); err != nil {
		return nil, nil, err
	}
	mp := filepath.Join(dir, ModelFile)
	text, err := safeio.ReadFile(mp, safeio.MaxText)
	if err != nil {
		return nil, nil, err
	}
	m, err := ir.Parse(mp, string(text))
	if err != nil {
		return nil, nil, err
	}
	wp := filepath.Join(dir, WeightsFile)
	sf, err := safetensors.Open(wp)
	if err != nil {
		return nil, nil, err
	}
	defer sf.Close()
	for _, w := range m.Weights {
		info, ok := sf.Info(w.Name)
		if !ok {
			return nil, nil, fmt.Errorf("%s: no tensor for weight @%s of %s", wp, w.Name, ModelFile)
		}
		got := info.Shape
		want := w.Type.Shape.Sizes()
		if info.DType != w.Type.DType || fmt.Sprint(got) != fmt.Sprint(want) {
			return nil, nil, fmt.Errorf("%s: tensor %q is %s%v, but %s declares %s", wp, w.Name, info.DType, got, ModelFile, w.Type)
		}
		off, _ := sf.Offset(w.Name)
		w.Source = &fileSource{path: wp, offset: off, size: info.Size()}
	}
	if n := len(sf.Names()); n != len(m.Weights) {
		return nil, nil, fmt.Errorf("%s: %d tensors, but %s declares %d weights", wp, n, ModelFile, len(m.Weights))
	}
	return m, man, nil
}

// fileSource reads a weight's bytes from the weights file when asked.
type fileSource struct {
	path         string
	offset, size int64
}

func (s *fileSource) Bytes() ([]byte, error) { return s.BytesAt(0, s.size) }

// BytesAt reads bytes off..off+n-1 of the weight alone (a shard of a weight
// split to fit a device: passes.RangeSource).
func (s *fileSource) BytesAt(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > s.size {
		return nil, fmt.Errorf("%s: bytes %d..%d of a weight of %d bytes", s.path, off, off+n-1, s.size)
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, s.offset+off); err != nil {
		return nil, fmt.Errorf("%s: reading %d bytes at %d: %w", s.path, n, s.offset+off, err)
	}
	return buf, nil
}

// LoadKernels reads the kernels a manifest lists.
func LoadKernels(dir string, man *Manifest) ([]EmittedKernel, error) {
	var out []EmittedKernel
	for _, mk := range man.Kernels {
		src, err := safeio.ReadFile(filepath.Join(dir, filepath.FromSlash(mk.File)), safeio.MaxText)
		if err != nil {
			return nil, err
		}
		op, ok := ir.OpNamed(mk.Op)
		if !ok {
			return nil, fmt.Errorf("kernel %s: unknown op %q", mk.File, mk.Op)
		}
		k := &codegen.Kernel{Language: mk.Language, Op: op, NodeID: mk.Node, Source: src, Entry: mk.Entry,
			WorkgroupSize: mk.WorkgroupSize, Grid: mk.Grid}
		for _, b := range mk.Bindings {
			t, err := ir.ParseType(b.Type)
			if err != nil {
				return nil, fmt.Errorf("%s: kernel %s: binding %d: %w", filepath.Join(dir, ManifestFile), mk.File, b.Index, err)
			}
			k.Bindings = append(k.Bindings, codegen.Binding{Index: b.Index, Name: b.Name, Access: codegen.Access(b.Access),
				Type: t, Input: b.Input, Output: b.Output})
		}
		out = append(out, EmittedKernel{Func: mk.Func, Kernel: k})
	}
	return out, nil
}

// StaticEmitter emits, with Generate, the kernel of every node whose input
// and output shapes are all static (a decode step; prefill kernels depend
// on the prompt length and are generated at run time). Meta ops need no
// kernel; in a partitioned module only target nodes get one.
type StaticEmitter struct {
	Ext      string
	Generate func(n *ir.Node, in, out []ir.Type) (*codegen.Kernel, error)
}

// Extension returns e.Ext.
func (e *StaticEmitter) Extension() string { return e.Ext }

// Emit generates the kernels.
func (e *StaticEmitter) Emit(m *ir.Module) ([]EmittedKernel, error) {
	partitioned := false
	for _, f := range m.Funcs {
		for _, n := range f.Nodes {
			partitioned = partitioned || n.Place != ""
		}
	}
	var out []EmittedKernel
	for _, f := range m.Funcs {
	nodes:
		for _, n := range f.Nodes {
			if d := n.Def(); d == nil || d.Kind == ir.KindMeta || (partitioned && n.Place != passes.Target) {
				continue
			}
			in := make([]ir.Type, len(n.Inputs))
			for i, v := range n.Inputs {
				if !v.Type.Shape.IsStatic() {
					continue nodes
				}
				in[i] = v.Type
			}
			outs := make([]ir.Type, len(n.Outputs))
			for i, v := range n.Outputs {
				if !v.Type.Shape.IsStatic() {
					continue nodes
				}
				outs[i] = v.Type
			}
			k, err := e.Generate(n, in, outs)
			if err != nil {
				return nil, fmt.Errorf("func @%s: %w", f.Name, err)
			}
			out = append(out, EmittedKernel{Func: f.Name, Kernel: k})
		}
	}
	return out, nil
}
