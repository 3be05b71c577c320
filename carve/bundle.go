package carve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/token"
	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/internal/yamlcheck"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
	"github.com/tapml/tapml/tensor/safetensors"
)

// The bundle format. A bundle is a folder:
//
//	manifest.yaml        what the cases are (written last)
//	tensors.safetensors  the recorded inputs and outputs, named t1, t2, ...;
//	                     a tensor several cases share is stored once
//	weights.safetensors  the module weights the cases read, by their IR
//	                     names, each stored once
//	module.tir           the compiled, probed module the cases come from
//	                     (text form, without weight data), for reference
//
// The manifest holds the format name and version, what was carved (model,
// prompt, steps, keep, pipeline; for models that are not language models,
// the seed and the source of each input), the run's statistics, every file with its
// size and SHA-256, the number of cases, the cases themselves (see Case)
// and, last, an end marker.
const (
	FormatName    = "tapml-carve-bundle"
	// FormatVersion is the version Write writes; Open reads it and every
	// older one. 2 added injected_faults, input_sets and a case's set; 3
	// weights in their storage dtypes (f16, bf16, ggml's block formats under
	// ggml's names in weights.safetensors, as in module.tir and the cases).
	FormatVersion = 3

	ManifestFile = "manifest.yaml"
	TensorsFile  = "tensors.safetensors"
	WeightsFile  = "weights.safetensors"
	ModuleFile   = "module.tir"
)

// Manifest is the content of manifest.yaml.
type Manifest struct {
	Format    string   `yaml:"format"`
	Version   int      `yaml:"version"`
	Model     string   `yaml:"model"`
	Prompt    string   `yaml:"prompt"`
	Steps     int      `yaml:"steps"`
	Keep      int      `yaml:"keep"`
	Reference string   `yaml:"reference"`
	Pipeline  []string `yaml:"pipeline,flow"`
	Generated []int    `yaml:"generated,flow"`
	// Seed and Inputs: the arguments of a model that is not a language
	// model (see CarveCalls); absent for language models.
	Seed   uint64      `yaml:"seed,omitempty"`
	Inputs []InputInfo `yaml:"inputs,omitempty"`
	// Faults are test-only faults that were planted in the target's
	// kernels when the bundle was written (a migration's regression
	// bundle under --inject); `tapmlc test` plants them again.
	Faults []Fault `yaml:"injected_faults,omitempty"`
	// Sets are the input sets when several were carved (the first is also
	// in prompt, generated or inputs).
	Sets      []SetInfo  `yaml:"input_sets,omitempty"`
	Stats     Stats      `yaml:"stats"`
	Files     []FileInfo `yaml:"files"`
	CaseCount int        `yaml:"case_count"`
	Cases     []*Case    `yaml:"cases"`
	// End is the last key written (EndMarker), so that a manifest cut
	// anywhere is known to be truncated.
	End string `yaml:"end"`
}

// EndMarker is the value of the manifest's last key.
const EndMarker = "end of manifest"

// FileInfo is a file of a bundle with its size and checksum.
type FileInfo struct {
	Path   string `yaml:"path"`
	Bytes  int64  `yaml:"bytes"`
	SHA256 string `yaml:"sha256"`
}

// Write writes the recording as a bundle in dir, atomically: the files go
// to a temporary folder beside dir, which then replaces dir in one rename.
// A failure leaves dir as it was. An existing dir is replaced only when it
// is empty or a bundle (it has a manifest.yaml). It returns the bytes
// written.
func (rec *Recording) Write(dir string) (int64, error) {
	dir = filepath.Clean(dir)
	if err := checkReplaceable(dir); err != nil {
		return 0, err
	}
	var total int64
	err := atomicfile.WriteDir(dir, func(tmp string) (err error) {
		total, err = rec.writeFiles(tmp)
		return err
	})
	return total, err
}

// checkReplaceable refuses to replace anything but an empty folder or a
// bundle.
func checkReplaceable(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: exists and is not a folder; not replacing it with a test bundle", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
		return fmt.Errorf("%s: a folder that is not empty and not a test bundle (no %s); not replacing it", dir, ManifestFile)
	}
	return nil
}

// writeFiles writes the bundle's files into dir (manifest last).
func (rec *Recording) writeFiles(dir string) (int64, error) {
	// Name every distinct recorded tensor once, in case order.
	var entries []safetensors.Entry
	names := map[*tensor.Tensor]string{}
	weights := map[string]*ir.Weight{}
	var weightNames []string
	for _, c := range rec.Cases {
		for _, ops := range [][]Operand{c.Inputs, c.Outputs} {
			for i := range ops {
				o := &ops[i]
				if o.Weight != "" {
					if weights[o.Weight] == nil {
						w := rec.Module.Weight(o.Weight)
						if w == nil {
							return 0, fmt.Errorf("case %s: weight %q is not in module %q", c.ID, o.Weight, rec.Module.Name)
						}
						weights[o.Weight] = w
						weightNames = append(weightNames, o.Weight)
					}
					continue
				}
				if o.t == nil {
					return 0, fmt.Errorf("case %s: operand %s has no data", c.ID, o.Name)
				}
				name, ok := names[o.t]
				if !ok {
					name = fmt.Sprintf("t%d", len(names)+1)
					names[o.t] = name
					entries = append(entries, safetensors.TensorEntry(name, o.t))
				}
				o.Tensor = name
			}
		}
	}
	meta := map[string]string{"format": FormatName}
	if err := safetensors.Write(filepath.Join(dir, TensorsFile), entries, meta); err != nil {
		return 0, err
	}
	sort.Strings(weightNames)
	var wentries []safetensors.Entry
	for _, n := range weightNames {
		w := weights[n]
		if w.Source == nil {
			return 0, fmt.Errorf("weight @%s has no data attached", n)
		}
		wentries = append(wentries, safetensors.Entry{Name: n, DType: w.Type.DType, Shape: w.Type.Shape.Sizes(), Data: w.Source.Bytes})
	}
	if err := safetensors.Write(filepath.Join(dir, WeightsFile), wentries, meta); err != nil {
		return 0, err
	}
	if err := writeSynced(filepath.Join(dir, ModuleFile), []byte(ir.Text(rec.Module))); err != nil {
		return 0, err
	}
	m := &Manifest{
		Format: FormatName, Version: FormatVersion, Model: rec.Model, Prompt: rec.Prompt, Steps: rec.Steps,
		Keep: rec.Keep, Reference: "cpu", Pipeline: rec.Pipeline, Generated: rec.Generated, Seed: rec.Seed, Inputs: rec.Inputs, Faults: rec.Faults, Sets: rec.Sets, Stats: rec.Stats,
		CaseCount: len(rec.Cases), Cases: rec.Cases, End: EndMarker,
	}
	var total int64
	for _, f := range []string{TensorsFile, WeightsFile, ModuleFile} {
		if err := os.Chmod(filepath.Join(dir, f), 0o644); err != nil {
			return 0, err
		}
		fi, err := hashFile(filepath.Join(dir, f))
		if err != nil {
			return 0, err
		}
		fi.Path = f
		m.Files = append(m.Files, fi)
		total += fi.Bytes
	}
	data, err := m.Marshal()
	if err != nil {
		return 0, err
	}
	if err := writeSynced(filepath.Join(dir, ManifestFile), data); err != nil {
		return 0, err
	}
	return total + int64(len(data)), nil
}

// Marshal writes the manifest as YAML, with a header comment.
func (m *Manifest) Marshal() ([]byte, error) {
	body, err := yaml.MarshalWithOptions(m, yaml.IndentSequence(true))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# A tapml test bundle: operator calls carved from a reference run.\n")
	b.WriteString("# Replay it with: tapmlc test <this folder> --target T\n")
	b.Write(body)
	return b.Bytes(), nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func hashFile(path string) (FileInfo, error) {
	f, _, err := safeio.Open(path)
	if err != nil {
		return FileInfo{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	return FileInfo{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Bundle is an opened test bundle.
type Bundle struct {
	Dir      string
	Manifest *Manifest
	tensors  *safetensors.File
	weights  *safetensors.File

	mu    sync.Mutex
	wdata map[string][]byte
}

// Open reads a bundle's manifest, checks its format version, the size and
// checksum of every file, and that every case is well formed and refers to
// tensors and weights that exist with the dtypes and shapes it says. Errors
// name the file (and the case) at fault.
func Open(dir string) (*Bundle, error) {
	mpath := filepath.Join(dir, ManifestFile)
	data, err := safeio.ReadFile(mpath, safeio.MaxManifest)
	if errors.Is(err, fs.ErrNotExist) {
		if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s: no such test bundle folder", dir)
		}
		return nil, fmt.Errorf("%s: missing; %s is not a test bundle (tapmlc carve writes one)", mpath, dir)
	}
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(mpath, data)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Dir: dir, Manifest: m, wdata: map[string][]byte{}}
	for _, f := range m.Files {
		if err := checkFile(dir, f); err != nil {
			return nil, err
		}
	}
	for _, need := range []string{TensorsFile, WeightsFile} {
		found := false
		for _, f := range m.Files {
			found = found || f.Path == need
		}
		if !found {
			return nil, fmt.Errorf("%s: files does not list %s", mpath, need)
		}
	}
	if b.tensors, err = safetensors.Open(filepath.Join(dir, TensorsFile)); err != nil {
		return nil, err
	}
	if b.weights, err = safetensors.Open(filepath.Join(dir, WeightsFile)); err != nil {
		b.tensors.Close()
		return nil, err
	}
	for _, c := range m.Cases {
		if err := b.checkCase(c); err != nil {
			b.Close()
			return nil, fmt.Errorf("%s: case %s: %w", mpath, c.ID, err)
		}
	}
	return b, nil
}

// Close closes the bundle's tensor files.
func (b *Bundle) Close() error {
	var err error
	if b.tensors != nil {
		err = b.tensors.Close()
	}
	if b.weights != nil {
		if werr := b.weights.Close(); err == nil {
			err = werr
		}
	}
	return err
}

// ParseManifest reads a manifest. The format version is checked before
// anything else, so a bundle from a newer tapml is reported as such rather
// than as unknown fields.
func ParseManifest(path string, data []byte) (*Manifest, error) {
	if err := yamlcheck.Check(path, data, safeio.MaxManifest); err != nil {
		return nil, err
	}
	var head struct {
		Format  string  `yaml:"format"`
		Version float64 `yaml:"version"` // read as a number, so 1.5 is refused, not truncated
	}
	if err := safeUnmarshal(data, &head); err != nil {
		return nil, yamlError(path, err, "corrupt or truncated manifest")
	}
	if head.Format == "" {
		return nil, fmt.Errorf("%s: no format field: not a tapml test bundle manifest (or a corrupt one)", path)
	}
	if head.Format != FormatName {
		return nil, fmt.Errorf("%s: format is %q, want %q: not a tapml test bundle manifest, or corrupt", path, head.Format, FormatName)
	}
	if head.Version != math.Trunc(head.Version) {
		return nil, fmt.Errorf("%s: format version %g is not a whole number", path, head.Version)
	}
	if head.Version > FormatVersion {
		return nil, fmt.Errorf("%s: bundle format version %g is newer than this tapml reads (%d); use a newer tapmlc, or carve the tests again", path, head.Version, FormatVersion)
	}
	if head.Version < 1 {
		return nil, fmt.Errorf("%s: bad format version %g", path, head.Version)
	}
	m := &Manifest{}
	if err := safeUnmarshal(data, m, yaml.DisallowUnknownField()); err != nil {
		return nil, yamlError(path, err, "corrupt manifest")
	}
	if m.End != EndMarker {
		return nil, fmt.Errorf("%s: no end marker (end: %q as the last line): the manifest is truncated", path, EndMarker)
	}
	if m.CaseCount != len(m.Cases) {
		return nil, fmt.Errorf("%s: case_count is %d but %d cases follow: the manifest is truncated or corrupt", path, m.CaseCount, len(m.Cases))
	}
	ids := map[string]bool{}
	for i, c := range m.Cases {
		if c == nil || c.ID == "" || c.Op == "" {
			return nil, fmt.Errorf("%s: case %d has no id or op: the manifest is corrupt", path, i+1)
		}
		if ids[c.ID] {
			return nil, fmt.Errorf("%s: case id %s appears twice", path, c.ID)
		}
		if err := c.Tolerance.Check(); err != nil {
			return nil, fmt.Errorf("%s: case %s: %v", path, c.ID, err)
		}
		ids[c.ID] = true
	}
	return m, nil
}

// safeUnmarshal decodes YAML, turning a panic of the YAML library on
// malformed input into an error.
func safeUnmarshal(data []byte, v any, opts ...yaml.DecodeOption) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (%v)", r)
		}
	}()
	return yaml.UnmarshalWithOptions(data, v, opts...)
}

// yamlError formats a YAML error as "file:line:col: what: message".
func yamlError(path string, err error, what string) error {
	var ye interface {
		GetMessage() string
		GetToken() *token.Token
	}
	if errors.As(err, &ye) {
		if t := ye.GetToken(); t != nil && t.Position != nil && t.Position.Line > 0 {
			return fmt.Errorf("%s:%d:%d: %s: %s", path, t.Position.Line, t.Position.Column, what, ye.GetMessage())
		}
		return fmt.Errorf("%s: %s: %s", path, what, ye.GetMessage())
	}
	return fmt.Errorf("%s: %s: %s", path, what, firstLine(err.Error()))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// checkFile checks that a listed file exists with its recorded size and
// checksum.
func checkFile(dir string, f FileInfo) error {
	if f.Path == "" || filepath.IsAbs(f.Path) || strings.Contains(f.Path, "..") {
		return fmt.Errorf("%s: bad file path %q in the manifest", filepath.Join(dir, ManifestFile), f.Path)
	}
	path := filepath.Join(dir, f.Path)
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: missing (the manifest lists it): the bundle is incomplete", path)
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &safeio.NotRegularError{Path: path, Mode: st.Mode()}
	}
	if st.Size() != f.Bytes {
		return fmt.Errorf("%s: %d bytes, but the manifest says %d: the file is truncated or corrupt", path, st.Size(), f.Bytes)
	}
	fi, err := hashFile(path)
	if err != nil {
		return err
	}
	if fi.SHA256 != f.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, but the manifest says %s: the file is corrupt or was modified", path, fi.SHA256, f.SHA256)
	}
	return nil
}

// checkCase validates one case against the op registry and the tensor
// files, without reading tensor data.
func (b *Bundle) checkCase(c *Case) error {
	op, ok := ir.OpNamed(c.Op)
	if !ok {
		return fmt.Errorf("unknown op %q", c.Op)
	}
	d := ir.LookupOp(op)
	if _, err := DecodeAttrs(c.Op, c.Attrs); err != nil {
		return err
	}
	if n := len(c.Inputs); n < d.MinInputs || (d.MaxInputs >= 0 && n > d.MaxInputs) {
		return fmt.Errorf("op %s with %d inputs", c.Op, n)
	}
	if len(c.Outputs) != d.Outputs {
		return fmt.Errorf("op %s has %d outputs, the case %d", c.Op, d.Outputs, len(c.Outputs))
	}
	check := func(what string, i int, o Operand) error {
		t, err := o.Type()
		if err != nil {
			return fmt.Errorf("%s %d (%s): %v", what, i, o.Name, err)
		}
		var info safetensors.Info
		var ok bool
		var file string
		switch {
		case o.Weight != "" && o.Tensor != "":
			return fmt.Errorf("%s %d (%s) names both a weight and a tensor", what, i, o.Name)
		case o.Weight != "" && what == "input":
			info, ok = b.weights.Info(o.Weight)
			file = WeightsFile
		case o.Tensor != "":
			info, ok = b.tensors.Info(o.Tensor)
			file = TensorsFile
		default:
			return fmt.Errorf("%s %d (%s) has no data (tensor or weight)", what, i, o.Name)
		}
		name := o.Tensor + o.Weight
		if !ok {
			return fmt.Errorf("%s %d (%s): %q is not in %s", what, i, o.Name, name, file)
		}
		if info.DType != t.DType || !sameShape(info.Shape, o.Shape) {
			return fmt.Errorf("%s %d (%s): %s is %s%v in %s, the manifest says %s", what, i, o.Name, name, info.DType, info.Shape, file, t)
		}
		return nil
	}
	for i, o := range c.Inputs {
		if err := check("input", i, o); err != nil {
			return err
		}
	}
	for i, o := range c.Outputs {
		if err := check("output", i, o); err != nil {
			return err
		}
	}
	return nil
}

// weightBytes returns a weight's bytes, read once per bundle.
func (b *Bundle) weightBytes(name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d, ok := b.wdata[name]; ok {
		return d, nil
	}
	d, err := b.weights.Bytes(name)
	if err != nil {
		return nil, err
	}
	b.wdata[name] = d
	return d, nil
}

// Tensors reads a case's input and output tensors.
func (b *Bundle) Tensors(c *Case) (in, out []*tensor.Tensor, err error) {
	read := func(o Operand) (*tensor.Tensor, error) {
		if o.t != nil {
			return o.t, nil
		}
		if o.Weight != "" {
			raw, err := b.weightBytes(o.Weight)
			if err != nil {
				return nil, err
			}
			t, err := o.Type()
			if err != nil {
				return nil, err
			}
			return tensor.FromBytes(t.DType, o.Shape, raw)
		}
		return b.tensors.Tensor(o.Tensor)
	}
	for _, o := range c.Inputs {
		t, err := read(o)
		if err != nil {
			return nil, nil, fmt.Errorf("case %s: input %s: %w", c.ID, o.Name, err)
		}
		in = append(in, t)
	}
	for _, o := range c.Outputs {
		t, err := read(o)
		if err != nil {
			return nil, nil, fmt.Errorf("case %s: output %s: %w", c.ID, o.Name, err)
		}
		out = append(out, t)
	}
	return in, out, nil
}
