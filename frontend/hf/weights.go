package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tapml/tapml/frontend/internal/mmap"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor/safetensors"
)

// File names of a Hugging Face model folder.
const (
	ConfigFile    = "config.json"
	WeightsFile   = "model.safetensors"
	IndexFile     = "model.safetensors.index.json"
	TokenizerFile = "tokenizer.json"
	// GenerationConfigFile holds generate's settings: the EOS ids.
	GenerationConfigFile = "generation_config.json"
)

// maxIndexFile bounds the size of an index file read into memory.
const maxIndexFile = 64 << 20

// Checkpoint is the weights of a model folder: model.safetensors, or the
// shards that model.safetensors.index.json names, each memory-mapped
// read-only. Weights view the mappings, so a Checkpoint stays open while
// its modules are used.
type Checkpoint struct {
	Dir     string
	Index   string // the index file, "" for a single model.safetensors
	shards  []*shard
	tensors map[string]*tensorRef
}

type shard struct {
	path  string
	data  []byte
	unmap func() error
}

type tensorRef struct {
	shard *shard
	info  safetensors.Info
	off   int64 // absolute offset of the tensor's bytes in the file
}

// OpenCheckpoint opens the weights of the model folder dir: model.safetensors
// when present, else the shards of model.safetensors.index.json. Every
// error names the file it is about.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	c := &Checkpoint{Dir: dir, tensors: map[string]*tensorRef{}}
	single := filepath.Join(dir, WeightsFile)
	if _, err := os.Stat(single); err == nil {
		if _, err := c.openShard(single, nil); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	index := filepath.Join(dir, IndexFile)
	data, err := readSmall(index, maxIndexFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no %s or %s (only safetensors weights are supported; convert pytorch_model.bin first)",
			dir, WeightsFile, IndexFile)
	}
	if err != nil {
		return nil, err
	}
	wm, err := ParseIndex(index, data)
	if err != nil {
		return nil, err
	}
	c.Index = index
	byFile := map[string][]string{}
	for name, file := range wm {
		byFile[file] = append(byFile[file], name)
	}
	files := make([]string, 0, len(byFile))
	for f := range byFile {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		want := byFile[f]
		sort.Strings(want)
		path := filepath.Join(dir, f)
		if _, err := os.Stat(path); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: shard %s (which holds %q and %d more tensors) is missing: %w",
				index, f, want[0], len(want)-1, unwrapPathError(err))
		}
		s, err := c.openShard(path, wm)
		if err != nil {
			c.Close()
			return nil, err
		}
		for _, name := range want {
			if r, ok := c.tensors[name]; !ok || r.shard != s {
				c.Close()
				return nil, fmt.Errorf("%s: maps tensor %q to %s, but that file has no such tensor", index, name, f)
			}
		}
	}
	return c, nil
}

// openShard maps one safetensors file and records its tensors. With an
// index (wm), every tensor of the file must be listed there for this file.
func (c *Checkpoint) openShard(path string, wm map[string]string) (*shard, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	// Parse the header through ReadAt first: short or corrupt files get
	// the safetensors package's messages, and nothing is mapped for them.
	sf, err := safetensors.NewReader(f, st.Size(), path)
	if err != nil {
		return nil, err
	}
	data, unmap, err := mmap.Map(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &shard{path: path, data: data, unmap: unmap}
	c.shards = append(c.shards, s)
	base := filepath.Base(path)
	for _, in := range sf.Infos() {
		if prev, dup := c.tensors[in.Name]; dup {
			return nil, fmt.Errorf("%s: tensor %q is also in %s", path, in.Name, prev.shard.path)
		}
		if wm != nil {
			if mapped, ok := wm[in.Name]; !ok {
				return nil, fmt.Errorf("%s: tensor %q is not listed in %s", path, in.Name, IndexFile)
			} else if mapped != base {
				return nil, fmt.Errorf("%s: tensor %q is in this file, but %s maps it to %s", path, in.Name, IndexFile, mapped)
			}
		}
		off, _ := sf.Offset(in.Name)
		c.tensors[in.Name] = &tensorRef{shard: s, info: in, off: off}
	}
	return s, nil
}

// Close releases the mappings; weights from the checkpoint must not be
// used afterwards.
func (c *Checkpoint) Close() error {
	var first error
	for _, s := range c.shards {
		if s.unmap != nil {
			if err := s.unmap(); err != nil && first == nil {
				first = err
			}
			s.unmap, s.data = nil, nil
		}
	}
	return first
}

// Names returns the names of all tensors, sorted.
func (c *Checkpoint) Names() []string {
	out := make([]string, 0, len(c.tensors))
	for n := range c.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Has reports whether the checkpoint has a tensor of that name.
func (c *Checkpoint) Has(name string) bool {
	_, ok := c.tensors[name]
	return ok
}

// Info describes a tensor and names the file that holds it.
func (c *Checkpoint) Info(name string) (info safetensors.Info, file string, ok bool) {
	r, ok := c.tensors[name]
	if !ok {
		return safetensors.Info{}, "", false
	}
	in := r.info
	in.Shape = append([]int{}, in.Shape...)
	return in, r.shard.path, true
}

// Raw returns the tensor's bytes as stored (a view of the mapping).
func (c *Checkpoint) Raw(name string) ([]byte, error) {
	r, ok := c.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", c.Dir, name)
	}
	if r.shard.data == nil {
		return nil, fmt.Errorf("%s: closed", r.shard.path)
	}
	n := r.info.Size()
	return r.shard.data[r.off : r.off+n : r.off+n], nil
}

// Source returns the weight source of a tensor after checking its shape
// against want: the mapped bytes, in the tensor's dtype (F32, F16 or BF16,
// kept as they are; see arch.Build). Errors name the file and the tensor.
func (c *Checkpoint) Source(name string, want []int) (ir.WeightSource, error) {
	r, ok := c.tensors[name]
	if !ok {
		where := c.Dir + "/" + WeightsFile
		if c.Index != "" {
			where = c.Index
		}
		return nil, fmt.Errorf("%s: missing tensor %q", where, name)
	}
	if !slices.Equal(r.info.Shape, want) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, but config.json implies %v", r.shard.path, name, r.info.Shape, want)
	}
	raw, err := c.Raw(name)
	if err != nil {
		return nil, err
	}
	switch r.info.DType {
	case ir.F32:
		return ir.BytesSource(raw), nil
	case ir.F16, ir.BF16:
		return ir.TypedBytes{Type: r.info.DType, Data: raw}, nil
	}
	return nil, fmt.Errorf("%s: tensor %q has dtype %s; weights must be F32, F16 or BF16", r.shard.path, name, r.info.DType)
}

// Stack returns a weight source of shape want whose slices along the
// first axis are the tensors names, each of shape want[1:] and all of one
// dtype, which the stack keeps (a mixture of experts' weights, stored one
// tensor per expert). The stacked bytes are assembled on first use.
func (c *Checkpoint) Stack(names []string, want []int) (ir.WeightSource, error) {
	if len(want) == 0 || want[0] != len(names) {
		return nil, fmt.Errorf("%s: %d tensors do not stack to %v", c.Dir, len(names), want)
	}
	s := &stackSource{}
	for i, n := range names {
		src, err := c.Source(n, want[1:])
		if err != nil {
			return nil, err
		}
		if dt := ir.SourceDType(src); i == 0 {
			s.dtype = dt
		} else if dt != s.dtype {
			return nil, fmt.Errorf("%s: tensor %q is %s but %q is %s; the tensors of a stack must share a dtype", c.Dir, n, dt, names[0], s.dtype)
		}
		s.parts = append(s.parts, src)
	}
	return s, nil
}

// stackSource concatenates the bytes of its parts on the first call to
// Bytes and keeps the result.
type stackSource struct {
	parts []ir.WeightSource
	dtype ir.DType
	once  sync.Once
	out   []byte
	err   error
}

// DType returns the parts' dtype.
func (s *stackSource) DType() ir.DType { return s.dtype }

// Bytes returns the parts' bytes one after the other.
func (s *stackSource) Bytes() ([]byte, error) {
	s.once.Do(func() {
		for _, p := range s.parts {
			b, err := p.Bytes()
			if err != nil {
				s.err = err
				return
			}
			s.out = append(s.out, b...)
		}
	})
	return s.out, s.err
}

// ParseIndex reads a model.safetensors.index.json: an object whose
// "weight_map" maps each tensor name to the shard file holding it (a plain
// file name in the same folder, ending in .safetensors). "metadata" and any
// other keys are ignored. name is used in errors.
func ParseIndex(name string, data []byte) (map[string]string, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fail("not a JSON object: %v", err)
	}
	raw, ok := top["weight_map"]
	if !ok {
		return nil, fail("no \"weight_map\"")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fail("\"weight_map\" must be an object of tensor name to file name")
	}
	wm := map[string]string{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fail("weight_map: %v", err)
		}
		k, _ := kt.(string)
		vt, err := dec.Token()
		if err != nil {
			return nil, fail("weight_map: %v", err)
		}
		v, ok := vt.(string)
		if !ok {
			return nil, fail("weight_map: tensor %q maps to %v, want a file name", k, vt)
		}
		if k == "" {
			return nil, fail("weight_map: a tensor has an empty name")
		}
		if _, dup := wm[k]; dup {
			return nil, fail("weight_map: tensor %q is listed twice", k)
		}
		if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/\\\x00") || !strings.HasSuffix(v, ".safetensors") {
			return nil, fail("weight_map: tensor %q maps to %q, which is not a .safetensors file name in the model folder", k, v)
		}
		wm[k] = v
	}
	if len(wm) == 0 {
		return nil, fail("\"weight_map\" is empty")
	}
	return wm, nil
}

// readSmall reads a file of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes is too large (limit %d)", path, st.Size(), limit)
	}
	return os.ReadFile(path)
}

// unwrapPathError drops the path from an *os.PathError, for messages that
// name the file themselves.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
