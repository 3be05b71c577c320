package migrate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tapml/tapml/carve"
	"github.com/tapml/tapml/internal/atomicfile"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
)

// Dump writes, for every node placed on the target in placement onTarget
// and every call of the model, the node's outputs in that placement and in
// the reference placement, as .npy files in dir:
//
//	call003.node0042.matmul.out0.target.npy
//	call003.node0042.matmul.out0.reference.npy
//
// and index.tsv, one line per pair: call, function, node, op, provenance,
// output, shape, max abs and max rel error of target against reference.
// The folder is written atomically (a temporary folder renamed into
// place); an existing dir must be empty or an earlier dump (it has an
// index.tsv). It returns the number of pairs written.
func (d *Driver) Dump(dir string, onTarget []int) (int, error) {
	dir = filepath.Clean(dir)
	if err := checkDumpDir(dir); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	placed := map[int]bool{}
	for _, id := range onTarget {
		placed[id] = true
	}
	name := func(n *ir.Node, k int, side string) string {
		return fmt.Sprintf("call%03d.node%04d.%s.out%d.%s.npy", d.step, n.ID, n.Op, k, side)
	}
	write := func(side string) func(n *ir.Node, in, out []*runtime.Buffer) error {
		return func(n *ir.Node, _, out []*runtime.Buffer) error {
			if !placed[n.ID] {
				return nil
			}
			for k, b := range out {
				t, err := runtime.Download(b)
				if err != nil {
					return err
				}
				if err := carve.WriteNPYFile(filepath.Join(tmp, name(n, k, side)), t); err != nil {
					return err
				}
			}
			return nil
		}
	}
	refMod, err := d.partitioned(nil)
	if err != nil {
		return 0, err
	}
	if _, err := d.generate(refMod, write("reference"), d.ref); err != nil {
		return 0, fmt.Errorf("dumping the reference: %w", err)
	}
	var index strings.Builder
	index.WriteString("call\tfunc\tnode\top\tprov\toutput\tshape\tmax_abs\tmax_rel\n")
	pairs := 0
	target := write("target")
	m, err := d.partitioned(onTarget)
	if err != nil {
		return 0, err
	}
	_, err = d.generate(m, func(n *ir.Node, in, out []*runtime.Buffer) error {
		if err := target(n, in, out); err != nil || !placed[n.ID] {
			return err
		}
		for k := range out {
			got, err := carve.ReadTensor(filepath.Join(tmp, name(n, k, "target")))
			if err != nil {
				return err
			}
			want, err := carve.ReadTensor(filepath.Join(tmp, name(n, k, "reference")))
			if err != nil {
				return fmt.Errorf("node %d did not run in the reference's call %d: %w", n.ID, d.step, err)
			}
			m, err := carve.Compare(got, want, carve.Tolerance{})
			if err != nil {
				return err
			}
			fmt.Fprintf(&index, "%d\t%s\t%d\t%s\t%s\t%d\t%v\t%s\t%s\n", d.step, d.Func(n.ID), n.ID, n.Op, n.Prov, k, got.Shape, fmtNum(m.MaxAbs), fmtNum(m.MaxRel))
			pairs++
		}
		return nil
	}, d.ref)
	if err != nil {
		return 0, fmt.Errorf("dumping the target: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, "index.tsv"), []byte(index.String())); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return 0, err
	}
	return pairs, nil
}

// checkDumpDir refuses to replace anything but nothing, an empty folder or
// an earlier dump.
func checkDumpDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(filepath.Dir(dir), 0o755)
	}
	if err != nil {
		return fmt.Errorf("--dump %s: %w", dir, err)
	}
	if len(entries) > 0 && !slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == "index.tsv" }) {
		return fmt.Errorf("--dump %s: a folder that is not empty and not an earlier dump (no index.tsv); not replacing it", dir)
	}
	return nil
}
