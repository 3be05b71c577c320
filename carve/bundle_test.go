package carve

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tapml/tapml/ir"
)

// snapshot reads every file of a folder, to check that nothing changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return out
}

func TestOpenErrors(t *testing.T) {
	good, _ := carvedStories(t)
	manifest, err := os.ReadFile(filepath.Join(good, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   []string // substrings of the error
	}{
		{"missing manifest", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, ManifestFile)) },
			[]string{"manifest.yaml: missing", "not a test bundle"}},
		{"corrupt manifest", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte("format: tapml-carve-bundle\nversion: 1\ncases: [\n  {id: c1, op:"), 0o644)
		}, []string{"manifest.yaml:", "corrupt"}},
		{"garbage manifest", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte{0x00, 0xff, 0x13, '\n', ':', ':'}, 0o644)
		}, []string{"manifest.yaml"}},
		{"truncated manifest", func(t *testing.T, dir string) {
			// Cut at a line boundary, so the YAML still parses.
			cut := bytes.LastIndex(manifest[:len(manifest)/2], []byte("\n  - id:"))
			os.WriteFile(filepath.Join(dir, ManifestFile), manifest[:cut+1], 0o644)
		}, []string{"manifest.yaml", "no end marker", "truncated"}},
		{"truncated manifest, count edited", func(t *testing.T, dir string) {
			cut := bytes.LastIndex(manifest, []byte("\nend:"))
			os.WriteFile(filepath.Join(dir, ManifestFile), append(bytes.Clone(manifest[:cut+1]), "end: end of manifest\n"...), 0o644)
			m, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
			cut = bytes.LastIndex(m[:len(m)/2], []byte("\n  - id:"))
			os.WriteFile(filepath.Join(dir, ManifestFile), append(bytes.Clone(m[:cut+1]), "end: end of manifest\n"...), 0o644)
		}, []string{"manifest.yaml", "case_count is 255", "truncated"}},
		{"last case cut", func(t *testing.T, dir string) {
			cut := bytes.LastIndex(manifest, []byte("\n    outputs:"))
			os.WriteFile(filepath.Join(dir, ManifestFile), append(bytes.Clone(manifest[:cut+1]), "end: end of manifest\n"...), 0o644)
		}, []string{"manifest.yaml: case c0255", "outputs"}},
		{"newer version", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("\nversion: 4\n"), []byte("\nversion: 5\nnew_field: x\n"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"manifest.yaml: bundle format version 5 is newer than this tapml reads (4)"}},
		{"fractional version", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("\nversion: 4\n"), []byte("\nversion: 2.5\n"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"manifest.yaml: format version 2.5 is not a whole number"}},
		{"unknown compute dtype", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("\n    tolerance:"), []byte("\n    compute: f8\n    tolerance:"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"manifest.yaml: case c0001: compute dtype \"f8\" (want f32 or f16)"}},
		{"NaN tolerance", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("\n      atol: "), []byte("\n      atol: .nan\n      #"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"manifest.yaml: case c0001: tolerance atol NaN is not a finite number >= 0"}},
		{"negative tolerance", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("\n      rtol: "), []byte("\n      rtol: -1\n      #"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"manifest.yaml: case c0001: tolerance rtol -1 is not a finite number >= 0"}},
		{"deeply nested manifest", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte("format: "+strings.Repeat("[", 100000)), 0o644)
		}, []string{"manifest.yaml:1: nested more than 64 levels deep"}},
		{"not a bundle manifest", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, ManifestFile), []byte("passes: [dce]\n"), 0o644)
		}, []string{"no format field: not a tapml test bundle manifest"}},
		{"unknown field", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("\nkeep: 1\n"), []byte("\nkeep: 1\nkepp: 2\n"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"manifest.yaml:", "kepp"}},
		{"missing tensor file", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, TensorsFile)) },
			[]string{"tensors.safetensors: missing (the manifest lists it)"}},
		{"missing weights file", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, WeightsFile)) },
			[]string{"weights.safetensors: missing"}},
		{"truncated tensor file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, TensorsFile)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/3], 0o644)
		}, []string{"tensors.safetensors:", "truncated"}},
		{"corrupt weights file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, WeightsFile)
			data, _ := os.ReadFile(p)
			data[len(data)-5] ^= 0x40
			os.WriteFile(p, data, 0o644)
		}, []string{"weights.safetensors: SHA-256", "corrupt"}},
		{"case names a missing tensor", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("tensor: t3\n"), []byte("tensor: t999999\n"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"case c0002", `"t999999" is not in tensors.safetensors`}},
		{"case with a wrong shape", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("shape: [512, 64]\n"), []byte("shape: [512, 65]\n"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"case c0001", "tok_embeddings is f32[512 64] in weights.safetensors"}},
		{"case with an unknown op", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("op: gather\n"), []byte("op: gathr\n"), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"case c0001", `unknown op "gathr"`}},
		{"case with a bad attribute", func(t *testing.T, dir string) {
			m := bytes.Replace(manifest, []byte("transpose_b: \"true\""), []byte("transpose_b: \"yes please\""), 1)
			os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		}, []string{"case c0003", "transpose_b", "not a valid bool"}},
		{"no such folder", func(t *testing.T, dir string) { os.RemoveAll(dir) }, []string{"no such test bundle folder"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, good)
			tc.damage(t, dir)
			var before map[string]string
			if _, err := os.Stat(dir); err == nil {
				before = snapshot(t, dir)
			}
			b, err := Open(dir)
			if err == nil {
				b.Close()
				t.Fatal("Open succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if before != nil {
				if after := snapshot(t, dir); len(after) != len(before) {
					t.Errorf("Open changed the folder: %d files, had %d", len(after), len(before))
				} else {
					for k, v := range before {
						if after[k] != v {
							t.Errorf("Open changed %s", k)
						}
					}
				}
			}
		})
	}
}

// TestOpenOlderVersions: a bundle of an older format version (its cases
// use nothing the version lacks: f32 weights, no input sets or faults)
// opens with all its cases.
func TestOpenOlderVersions(t *testing.T) {
	good, rec := carvedStories(t)
	manifest, err := os.ReadFile(filepath.Join(good, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1", "2", "3"} {
		dir := copyDir(t, good)
		m := bytes.Replace(manifest, []byte("\nversion: 4\n"), []byte("\nversion: "+v+"\n"), 1)
		if bytes.Equal(m, manifest) {
			t.Fatal("the manifest has no version 4 line")
		}
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := Open(dir)
		if err != nil {
			t.Errorf("version %s: %v", v, err)
			continue
		}
		if len(b.Manifest.Cases) != len(rec.Cases) {
			t.Errorf("version %s: %d cases, want %d", v, len(b.Manifest.Cases), len(rec.Cases))
		}
		b.Close()
	}
}

func TestWriteIsAtomic(t *testing.T) {
	good, rec := carvedStories(t)
	dir := copyDir(t, good)
	before := snapshot(t, dir)

	// A recording that fails half way (a weight the module lacks) leaves
	// the existing bundle untouched and no temporary folders behind.
	bad := *rec
	bad.Cases = append([]*Case(nil), rec.Cases...)
	broken := *rec.Cases[len(rec.Cases)-1]
	broken.Inputs = append([]Operand(nil), broken.Inputs...)
	broken.Inputs = append(broken.Inputs, Operand{Name: "@nope", DType: "f32", Shape: []int{1}, Weight: "nope"})
	bad.Cases = append(bad.Cases, &broken)
	if _, err := bad.Write(dir); err == nil || !strings.Contains(err.Error(), `weight "nope"`) {
		t.Fatalf("Write of a broken recording: %v", err)
	}
	after := snapshot(t, dir)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("a failed Write changed %s", k)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range entries {
		if e.Name() != filepath.Base(dir) {
			t.Errorf("left behind: %s", e.Name())
		}
	}

	// A good write replaces the bundle as a whole.
	n, err := rec.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	var size int64
	for name := range snapshot(t, dir) {
		st, _ := os.Stat(filepath.Join(dir, name))
		size += st.Size()
	}
	if n != size {
		t.Errorf("Write reported %d bytes, the folder holds %d", n, size)
	}
	entries, _ = os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("folders beside the bundle after a replace: %d", len(entries))
	}

	// A folder that is not a bundle is never replaced.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if _, err := rec.Write(other); err == nil || !strings.Contains(err.Error(), "not a test bundle") {
		t.Errorf("Write over a non-bundle folder: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(other, "notes.txt")); string(data) != "mine" {
		t.Error("Write touched a non-bundle folder")
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := rec.Write(file); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("Write over a file: %v", err)
	}
}

func TestManifestRoundTrip(t *testing.T) {
	good, rec := carvedStories(t)
	b, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := b.Manifest
	if m.Version != FormatVersion || m.Format != FormatName || m.CaseCount != len(rec.Cases) || m.Stats != rec.Stats {
		t.Errorf("manifest header: %+v", m)
	}
	for i, c := range m.Cases {
		r := rec.Cases[i]
		if c.ID != r.ID || c.Op != r.Op || c.Key != r.Key || c.Node != r.Node || c.NodeText != r.NodeText || c.Tolerance != r.Tolerance {
			t.Errorf("case %d: read %+v, wrote %+v", i, c, r)
		}
		in, out, err := b.Tensors(c)
		if err != nil {
			t.Fatal(err)
		}
		for j, x := range in {
			if !bytes.Equal(x.Data, r.Inputs[j].t.Data) {
				t.Errorf("case %s input %d differs after the round trip", c.ID, j)
			}
		}
		for j, x := range out {
			if !bytes.Equal(x.Data, r.Outputs[j].t.Data) {
				t.Errorf("case %s output %d differs after the round trip", c.ID, j)
			}
		}
	}
	// Weights are stored once: one entry per distinct weight name.
	used := map[string]bool{}
	for _, c := range m.Cases {
		for _, in := range c.Inputs {
			if in.Weight != "" {
				used[in.Weight] = true
			}
		}
	}
	if got := len(b.weights.Names()); got != len(used) {
		t.Errorf("weights file holds %d tensors, the cases use %d weights", got, len(used))
	}
	// The compiled module is stored beside, and every case's node is in it.
	text, err := os.ReadFile(filepath.Join(good, ModuleFile))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := ir.Parse(ModuleFile, string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Cases {
		f := mod.Func(c.Func)
		if f == nil || f.Node(c.Node) == nil || ir.NodeText(f.Node(c.Node)) != c.NodeText {
			t.Errorf("case %s: node #%d not in @%s of module.tir as %q", c.ID, c.Node, c.Func, c.NodeText)
		}
	}
}

// Files of a bundle that are FIFOs are refused by name, not read (which
// would wait for a writer forever).
func TestOpenRefusesFIFOs(t *testing.T) {
	good, _ := carvedStories(t)
	for _, name := range []string{ManifestFile, TensorsFile} {
		dir := copyDir(t, good)
		os.Remove(filepath.Join(dir, name))
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir)
		if want := name + ": a named pipe (FIFO), not a regular file"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s as a FIFO: %v, want %q", name, err, want)
		}
	}
}
