package cpu

import (
	"fmt"

	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/tensor"
)

// Evaluate computes node n on the values of its inputs, on the host: the
// one evaluator of nodes whose inputs are known before run time (constant
// folding in passes, the ONNX importer's shape arithmetic). out, when not
// nil, are the output types the results must have (static ones are
// checked); nil lets inference decide. The inputs are never changed: one
// that n updates in place (kv_write's cache) is copied first. The results
// are the caller's to keep.
func (d *Device) Evaluate(n *ir.Node, in []*tensor.Tensor, out []ir.Type) ([]*tensor.Tensor, error) {
	if n == nil {
		return nil, fmt.Errorf("cpu: evaluate of a nil node")
	}
	bufs := make([]*runtime.Buffer, len(in))
	for i, t := range in {
		if n.UpdatesInPlace(i) && t != nil {
			t = t.Clone()
		}
		b, err := d.Upload(t)
		if err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
		bufs[i] = b
	}
	res, err := d.Launch(n, bufs, out)
	if err != nil {
		return nil, err
	}
	if out != nil && len(res) != len(out) {
		return nil, fmt.Errorf("%s: %d outputs, expected %d", n, len(res), len(out))
	}
	ts := make([]*tensor.Tensor, len(res))
	for i, b := range res {
		// Download copies: an output may share its input's data (reshape).
		if ts[i], err = d.Download(b); err != nil {
			return nil, err
		}
	}
	return ts, nil
}
