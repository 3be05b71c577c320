// Package frontend loads a model from any supported format, recognising the
// format by the file's content, not its name. The importers themselves live
// in subpackages, one per format.
package frontend

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tapml/tapml/artifact"
	"github.com/tapml/tapml/frontend/arch"
	"github.com/tapml/tapml/frontend/arch/llama"
	"github.com/tapml/tapml/frontend/gguf"
	"github.com/tapml/tapml/frontend/hf"
	"github.com/tapml/tapml/frontend/llama2c"
	"github.com/tapml/tapml/frontend/onnx"
	"github.com/tapml/tapml/frontend/tokenizer"
	"github.com/tapml/tapml/frontend/tokenizer/sentencepiece"
	"github.com/tapml/tapml/internal/safeio"
	"github.com/tapml/tapml/ir"
)

// Model is a loaded model: its IR (with weights attached) and, for
// language models, its tokenizer.
type Model struct {
	Module    *ir.Module
	Tokenizer Tokenizer // nil when the model has none
	Format    string    // "llama2c", "gguf", "hf", "tir", "builtin", ...
	Path      string
	// Target is the target a build folder was compiled for ("" for
	// other formats).
	Target string
}

// Tokenizer is a language model's tokenizer: SentencePiece as llama2.c
// runs it (*sentencepiece.Tokenizer, from tok*.bin, GGUF and build folders)
// or BPE with Hugging Face's pipeline (*bpe.Tokenizer, from tokenizer.json
// or GGUF).
type Tokenizer = tokenizer.Model

// asTokenizer turns a possibly nil *sentencepiece.Tokenizer into a Tokenizer
// that is nil when it is.
func asTokenizer(t *sentencepiece.Tokenizer) Tokenizer {
	if t == nil {
		return nil
	}
	return t
}

// Options tune loading.
type Options struct {
	Tokenizer string // a tokenizer file for formats that don't carry one
	// ONNX fixes the dynamic input dims of ONNX models (see onnx.Options).
	ONNX onnx.Options
}

// BuiltinSeed seeds the weights of the built-in tiny model.
const BuiltinSeed = 42

// BuiltinTiny returns the built-in model: llama.Tiny with random weights
// from a fixed seed and a byte-level tokenizer. It needs no files.
func BuiltinTiny() (*Model, error) {
	m, err := arch.Build("tiny-builtin", llama.Tiny, llama.RandomWeights(llama.Tiny, BuiltinSeed))
	if err != nil {
		return nil, err
	}
	m.Meta["source"] = "builtin"
	return &Model{Module: m, Tokenizer: sentencepiece.NewBytes(), Format: "builtin", Path: "builtin"}, nil
}

// Sniff reports the format of the file at path from its first bytes, or ""
// when it is not recognised.
func Sniff(path string) (string, error) {
	head, err := readHead(path, 512)
	if err != nil {
		return "", err
	}
	switch {
	case gguf.Sniff(head):
		return "gguf", nil
	case bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("module ")) ||
		bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("//")):
		return "tir", nil
	case onnx.Sniff(head):
		return "onnx", nil
	case llama2c.Sniff(head):
		return "llama2c", nil
	}
	return "", nil
}

// readHead returns up to n first bytes of a file.
func readHead(path string, n int) ([]byte, error) {
	f, _, err := safeio.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, n)
	k, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return head[:k], nil
}

// Load reads the model at path in whatever supported format it is.
func Load(path string, opts Options) (*Model, error) { return load(path, opts, nil) }

// load is Load; texts lists the IR text files whose weights are being
// loaded from path (each one's "source" leads to the next), to catch cycles.
func load(path string, opts Options, texts []string) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return nil, &safeio.NotRegularError{Path: path, Mode: st.Mode()}
	}
	if st.IsDir() {
		if !artifact.IsBuild(path) && hf.Sniff(path) {
			m, tok, err := hf.Load(path)
			if err != nil {
				return nil, err
			}
			model := &Model{Module: m, Format: "hf", Path: path}
			if tok != nil {
				model.Tokenizer = tok
			}
			if opts.Tokenizer != "" {
				t, err := llama2c.LoadModelTokenizer(opts.Tokenizer, m)
				if err != nil {
					return nil, err
				}
				model.Tokenizer = t
			}
			return model, nil
		}
		if !artifact.IsBuild(path) {
			return nil, fmt.Errorf("%s: a folder, but neither a build folder from 'tapmlc compile' (no manifest.yaml) nor a Hugging Face model folder (no config.json)", path)
		}
		m, man, err := artifact.Load(path)
		if err != nil {
			return nil, err
		}
		model := &Model{Module: m, Format: "build", Path: path, Target: man.Target}
		t, err := artifact.LoadTokenizer(path, man)
		if err != nil {
			return nil, err
		}
		model.Tokenizer = asTokenizer(t)
		if opts.Tokenizer != "" {
			t, err := llama2c.LoadModelTokenizer(opts.Tokenizer, m)
			if err != nil {
				return nil, err
			}
			model.Tokenizer = t
		}
		return model, nil
	}
	format, err := Sniff(path)
	if err != nil {
		return nil, err
	}
	model := &Model{Format: format, Path: path}
	switch format {
	case "gguf":
		model.Module, model.Tokenizer, err = gguf.Load(path)
	case "llama2c":
		model.Module, err = llama2c.Load(path)
	case "tir":
		model.Module, err = loadText(path, opts, texts)
	case "onnx":
		model.Module, err = onnx.Load(path, opts.ONNX)
	default:
		// A llama2.c header has no magic: say what is wrong with it in case
		// the file was meant to be one.
		why := ""
		if head, err := readHead(path, 256); err == nil {
			if _, err := llama2c.ParseHeader(head); err != nil {
				why = "; read as a llama2.c checkpoint: " + err.Error()
			}
		}
		return nil, fmt.Errorf("%s: not a model format tapml recognises (llama2.c checkpoint, GGUF, ONNX, tapml IR text)%s", path, why)
	}
	if err != nil {
		return nil, err
	}
	if opts.Tokenizer != "" {
		t, err := llama2c.LoadModelTokenizer(opts.Tokenizer, model.Module)
		if err != nil {
			return nil, err
		}
		model.Tokenizer = t
	}
	return model, nil
}

// loadText reads an IR text file and attaches the weights of the model it
// was imported from (its "source" meta entry, relative to the text file).
// texts are the text files already on the way to it; a source that leads
// back to one of them is an error.
func loadText(path string, opts Options, texts []string) (*ir.Module, error) {
	text, err := safeio.ReadFile(path, safeio.MaxText)
	if err != nil {
		return nil, err
	}
	m, err := ir.Parse(path, string(text))
	if err != nil {
		return nil, err
	}
	src := m.Meta["source"]
	if src == "" || len(m.Weights) == 0 {
		return m, nil
	}
	var from *ir.Module
	if src == "builtin" {
		b, err := BuiltinTiny()
		if err != nil {
			return nil, err
		}
		from = b.Module
	} else {
		if !filepath.IsAbs(src) {
			src = filepath.Join(filepath.Dir(path), src)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		texts = append(texts, abs)
		if absSrc, err := filepath.Abs(src); err == nil && slices.Contains(texts, absSrc) {
			return nil, fmt.Errorf("%s: meta \"source\" %s makes a cycle of text files: %s -> %s", path, src, strings.Join(texts, " -> "), absSrc)
		}
		orig, err := load(src, Options{ONNX: onnx.OptionsFromMeta(m.Meta)}, texts)
		if err != nil {
			return nil, fmt.Errorf("%s: loading its weights from %s: %w", path, src, err)
		}
		from = orig.Module
	}
	if err := m.AttachWeights(from); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
