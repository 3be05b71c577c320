package onnx

import (
	"fmt"

	"github.com/tapml/tapml/frontend/onnx/onnxpb"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// Recurrent ops: RNN, GRU and LSTM are unrolled over the sequence, which
// is static, into matmuls and elementwise ops, with ONNX's equations
// (gate orders: GRU z, r, h; LSTM i, o, f, c). The input projection of
// every step is one matmul over the whole sequence; each step adds the
// recurrent projection of the previous hidden state. Directions forward,
// reverse and bidirectional, layouts 0 ([seq, batch, ...]) and 1 ([batch,
// seq, ...]), clip, GRU's linear_before_reset and LSTM's peepholes are
// read; activations Sigmoid, Tanh and Relu. Sequence lengths, when given,
// must be known at import and equal to the sequence (no padded batches).
// Each step's nodes have the provenance "<node>/t<step>".

func init() {
	handlers["RNN"] = h(recurrent(rnnCell))
	handlers["GRU"] = h(recurrent(gruCell))
	handlers["LSTM"] = h(recurrent(lstmCell))
}

// cell describes one kind of recurrent op.
type cell struct {
	name     string
	gates    int      // blocks of hidden_size rows in W and R
	acts     []string // default activations, per direction
	outputs  int      // Y, Y_h (and Y_c)
	hasState bool     // LSTM's cell state
}

var (
	rnnCell  = cell{name: "RNN", gates: 1, acts: []string{"Tanh"}, outputs: 2}
	gruCell  = cell{name: "GRU", gates: 3, acts: []string{"Sigmoid", "Tanh"}, outputs: 2}
	lstmCell = cell{name: "LSTM", gates: 4, acts: []string{"Sigmoid", "Tanh", "Tanh"}, outputs: 3, hasState: true}
)

// activation ops the recurrent ops take.
var activations = map[string]ir.Op{"Sigmoid": ir.OpSigmoid, "Tanh": ir.OpTanh, "Relu": ir.OpRelu}

// recurrentRun holds what one recurrent node's unrolling needs.
type recurrentRun struct {
	im     *importer
	c      cell
	prov   string
	hidden int
	clip   float64 // 0: none
	lbr    bool    // GRU's linear_before_reset
	acts   []ir.Op // per direction, len(c.acts) each
}

func recurrent(c cell) func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto, in []*val) ([]*val, error) {
		xwr, err := args(in, "X", "W", "R")
		if err != nil {
			return nil, err
		}
		x, w, r := xwr[0], xwr[1], xwr[2]
		rr := &recurrentRun{im: im, c: c, prov: im.prefix + nodeName(n), hidden: int(attrInt(n, "hidden_size", 0)),
			clip: attrFloat(n, "clip", 0), lbr: attrInt(n, "linear_before_reset", 0) != 0}
		dirs := 1
		switch d := attrString(n, "direction", "forward"); d {
		case "forward", "reverse":
		case "bidirectional":
			dirs = 2
		default:
			return nil, fmt.Errorf("direction %q", d)
		}
		if err := rr.readActivations(n, dirs); err != nil {
			return nil, err
		}
		if attrInt(n, "input_forget", 0) != 0 {
			return nil, fmt.Errorf("input_forget (coupled input and forget gates) is not supported")
		}
		layout := attrInt(n, "layout", 0)
		h0, c0, p := opt(in, 5), opt(in, 6), opt(in, 7)
		if !c.hasState && (c0 != nil || p != nil) {
			return nil, fmt.Errorf("%s has no cell state or peepholes", c.name)
		}
		if layout == 1 {
			for _, v := range []**val{&x, &h0, &c0} {
				if *v != nil {
					if *v, err = im.op(ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(1, 0, 2)}, *v); err != nil {
						return nil, err
					}
				}
			}
		}
		xs := x.shape()
		if len(xs) != 3 {
			return nil, fmt.Errorf("X is %v, want [seq, batch, input]", xs)
		}
		gh := c.gates * rr.hidden
		if rr.hidden < 1 || fmt.Sprint(w.shape()) != fmt.Sprint([]int{dirs, gh, xs[2]}) || fmt.Sprint(r.shape()) != fmt.Sprint([]int{dirs, gh, rr.hidden}) {
			return nil, fmt.Errorf("W %v and R %v do not fit hidden_size %d, %d directions and input size %d", w.shape(), r.shape(), rr.hidden, dirs, xs[2])
		}
		if sl := opt(in, 4); sl != nil {
			lens, err := constInts(sl, "sequence_lens")
			if err != nil {
				return nil, err
			}
			for _, l := range lens {
				if l != int64(xs[0]) {
					return nil, fmt.Errorf("sequence_lens %v: every sequence must have all %d steps (padded batches are not supported)", lens, xs[0])
				}
			}
		}
		reverse := attrString(n, "direction", "forward") == "reverse"
		var ys, hs, cs []*val
		for d := range dirs {
			y, hLast, cLast, err := rr.direction(d, reverse || d == 1, x, w, r, opt(in, 3), h0, c0, p)
			if err != nil {
				return nil, err
			}
			ys, hs, cs = append(ys, y), append(hs, hLast), append(cs, cLast)
		}
		y, err := im.stack(ys, 1) // [seq, dirs, batch, hidden]
		if err != nil {
			return nil, err
		}
		outs := []*val{y}
		for _, states := range [][]*val{hs, cs}[:c.outputs-1] {
			s, err := im.stack(states, 0) // [dirs, batch, hidden]
			if err != nil {
				return nil, err
			}
			outs = append(outs, s)
		}
		if layout == 1 {
			perms := [][]int64{{2, 0, 1, 3}, {1, 0, 2}, {1, 0, 2}}
			for i := range outs {
				if outs[i], err = im.op(ir.OpTranspose, ir.Attrs{"perm": ir.IntsAttr(perms[i]...)}, outs[i]); err != nil {
					return nil, err
				}
			}
		}
		return outs, nil
	}
}

// readActivations reads the activations attribute (per direction).
func (rr *recurrentRun) readActivations(n *onnxpb.NodeProto, dirs int) error {
	names := make([]string, 0, dirs*len(rr.c.acts))
	if a := attr(n, "activations"); a != nil {
		for _, s := range a.GetStrings() {
			names = append(names, string(s))
		}
		if len(names) != dirs*len(rr.c.acts) {
			return fmt.Errorf("%d activations, want %d", len(names), dirs*len(rr.c.acts))
		}
	} else {
		for range dirs {
			names = append(names, rr.c.acts...)
		}
	}
	for _, s := range names {
		op, ok := activations[s]
		if !ok {
			return fmt.Errorf("activation %s is not supported (Sigmoid, Tanh and Relu are)", s)
		}
		rr.acts = append(rr.acts, op)
	}
	return nil
}

// direction unrolls one direction d of the sequence: it returns Y_d
// [seq, batch, hidden] in time order and the last hidden and cell states.
func (rr *recurrentRun) direction(d int, backward bool, x, w, r, b, h0, c0, p *val) (y, hLast, cLast *val, err error) {
	im, hid, g := rr.im, rr.hidden, rr.c.gates
	im.b.At(rr.prov)
	wd, err := im.take(w, 0, d)
	if err != nil {
		return nil, nil, nil, err
	}
	rd, err := im.take(r, 0, d)
	if err != nil {
		return nil, nil, nil, err
	}
	// The input projection of every step: X·Wᵀ [seq, batch, G·H], with
	// the biases that need no per-step term.
	xw, err := im.op(ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, x, wd)
	if err != nil {
		return nil, nil, nil, err
	}
	var rbh *val // GRU's Rbh with linear_before_reset: added inside the reset
	if b != nil {
		bd, err := im.take(b, 0, d)
		if err != nil {
			return nil, nil, nil, err
		}
		wb, err := rr.cols(bd, 0, g*hid)
		if err != nil {
			return nil, nil, nil, err
		}
		rb, err := rr.cols(bd, g*hid, 2*g*hid)
		if err != nil {
			return nil, nil, nil, err
		}
		if rr.c.name == "GRU" && rr.lbr {
			if rbh, err = rr.cols(rb, 2*hid, 3*hid); err != nil {
				return nil, nil, nil, err
			}
			zero := &val{c: tensor.New(rb.dtype(), []int{hid})}
			if rb, err = im.op(ir.OpConcat, ir.Attrs{"axis": ir.IntAttr(0)}, mustCols(rr, rb, 0, 2*hid), zero); err != nil {
				return nil, nil, nil, err
			}
		}
		bias, err := im.binop(ir.OpAdd, wb, rb)
		if err != nil {
			return nil, nil, nil, err
		}
		if xw, err = im.binop(ir.OpAdd, xw, bias); err != nil {
			return nil, nil, nil, err
		}
	}
	batch := x.shape()[1]
	state := func(v *val) (*val, error) {
		if v == nil {
			return &val{c: tensor.New(x.dtype(), []int{batch, hid})}, nil
		}
		return im.take(v, 0, d)
	}
	h, err := state(h0)
	if err != nil {
		return nil, nil, nil, err
	}
	var c *val
	if rr.c.hasState {
		if c, err = state(c0); err != nil {
			return nil, nil, nil, err
		}
	}
	var peep []*val // LSTM's Pi, Po, Pf
	if p != nil {
		pd, err := im.take(p, 0, d)
		if err != nil {
			return nil, nil, nil, err
		}
		for k := range 3 {
			pk, err := rr.cols(pd, k*hid, (k+1)*hid)
			if err != nil {
				return nil, nil, nil, err
			}
			peep = append(peep, pk)
		}
	}
	acts := rr.acts[d*len(rr.c.acts) : (d+1)*len(rr.c.acts)]
	seq := x.shape()[0]
	ys := make([]*val, seq)
	for k := range seq {
		t := k
		if backward {
			t = seq - 1 - k
		}
		im.b.At(fmt.Sprintf("%s/t%d", rr.prov, t))
		xt, err := im.take(xw, 0, t)
		if err != nil {
			return nil, nil, nil, err
		}
		switch rr.c.name {
		case "RNN":
			h, err = rr.rnnStep(xt, h, rd, acts)
		case "GRU":
			h, err = rr.gruStep(xt, h, rd, rbh, acts)
		default:
			h, c, err = rr.lstmStep(xt, h, c, rd, peep, acts)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("step %d: %w", t, err)
		}
		ys[t] = h
	}
	im.b.At(rr.prov)
	if y, err = im.stack(ys, 0); err != nil {
		return nil, nil, nil, err
	}
	return y, h, c, nil
}

// cols is columns [from, to) of the last axis of v.
func (rr *recurrentRun) cols(v *val, from, to int) (*val, error) {
	ax := len(v.shape()) - 1
	return rr.im.op(ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(int64(ax)), "start": ir.IntAttr(int64(from)), "end": ir.IntAttr(int64(to))}, v)
}

func mustCols(rr *recurrentRun, v *val, from, to int) *val {
	c, err := rr.cols(v, from, to)
	if err != nil {
		return v // the caller's op reports the shape error
	}
	return c
}

// recur is h·Rᵀ for rows [from, to) of R.
func (rr *recurrentRun) recur(h, rd *val, from, to int) (*val, error) {
	rows, err := rr.im.op(ir.OpSlice, ir.Attrs{"axis": ir.IntAttr(0), "start": ir.IntAttr(int64(from)), "end": ir.IntAttr(int64(to))}, rd)
	if err != nil {
		return nil, err
	}
	return rr.im.op(ir.OpMatmul, ir.Attrs{"transpose_b": ir.BoolAttr(true)}, h, rows)
}

// act applies an activation, after clipping to [-clip, clip] when set.
func (rr *recurrentRun) act(op ir.Op, v *val) (*val, error) {
	var err error
	if rr.clip > 0 {
		lo, hi := scalar(v.dtype(), -rr.clip), scalar(v.dtype(), rr.clip)
		if v, err = rr.im.op(ir.OpMaximum, nil, v, lo); err != nil {
			return nil, err
		}
		if v, err = rr.im.op(ir.OpMinimum, nil, v, hi); err != nil {
			return nil, err
		}
	}
	return rr.im.op(op, nil, v)
}

// gates is xt plus h·Rᵀ over rows [from, to), cut into blocks of the
// hidden size.
func (rr *recurrentRun) gates(xt, h, rd *val, from, to int) ([]*val, error) {
	hr, err := rr.recur(h, rd, from, to)
	if err != nil {
		return nil, err
	}
	xs, err := rr.cols(xt, from, to)
	if err != nil {
		return nil, err
	}
	sum, err := rr.im.op(ir.OpAdd, nil, xs, hr)
	if err != nil {
		return nil, err
	}
	var out []*val
	for k := 0; k < (to-from)/rr.hidden; k++ {
		gk, err := rr.cols(sum, k*rr.hidden, (k+1)*rr.hidden)
		if err != nil {
			return nil, err
		}
		out = append(out, gk)
	}
	return out, nil
}

// rnnStep: Ht = f(Xt·Wᵀ + Ht-1·Rᵀ + Wb + Rb).
func (rr *recurrentRun) rnnStep(xt, h, rd *val, acts []ir.Op) (*val, error) {
	g, err := rr.gates(xt, h, rd, 0, rr.hidden)
	if err != nil {
		return nil, err
	}
	return rr.act(acts[0], g[0])
}

// gruStep: zt = f(z), rt = f(r); ht = g(Xt·Whᵀ + (rt ⊙ Ht-1)·Rhᵀ + Rbh +
// Wbh), or with linear_before_reset g(Xt·Whᵀ + rt ⊙ (Ht-1·Rhᵀ + Rbh) +
// Wbh); Ht = (1 - zt) ⊙ ht + zt ⊙ Ht-1.
func (rr *recurrentRun) gruStep(xt, h, rd, rbh *val, acts []ir.Op) (*val, error) {
	im, hid := rr.im, rr.hidden
	zr, err := rr.gates(xt, h, rd, 0, 2*hid)
	if err != nil {
		return nil, err
	}
	z, err := rr.act(acts[0], zr[0])
	if err != nil {
		return nil, err
	}
	r, err := rr.act(acts[0], zr[1])
	if err != nil {
		return nil, err
	}
	xh, err := rr.cols(xt, 2*hid, 3*hid)
	if err != nil {
		return nil, err
	}
	var rec *val
	if rr.lbr {
		if rec, err = rr.recur(h, rd, 2*hid, 3*hid); err == nil && rbh != nil {
			rec, err = im.op(ir.OpAdd, nil, rec, rbh)
		}
		if err == nil {
			rec, err = im.op(ir.OpMul, nil, r, rec)
		}
	} else {
		var rh *val
		if rh, err = im.op(ir.OpMul, nil, r, h); err == nil {
			rec, err = rr.recur(rh, rd, 2*hid, 3*hid)
		}
	}
	if err != nil {
		return nil, err
	}
	pre, err := im.op(ir.OpAdd, nil, xh, rec)
	if err != nil {
		return nil, err
	}
	hh, err := rr.act(acts[1], pre)
	if err != nil {
		return nil, err
	}
	oneMinus, err := im.op(ir.OpSub, nil, scalar(z.dtype(), 1), z)
	if err != nil {
		return nil, err
	}
	a, err := im.op(ir.OpMul, nil, oneMinus, hh)
	if err != nil {
		return nil, err
	}
	b, err := im.op(ir.OpMul, nil, z, h)
	if err != nil {
		return nil, err
	}
	return im.op(ir.OpAdd, nil, a, b)
}

// lstmStep: it = f(i + Pi ⊙ Ct-1), ft = f(f + Pf ⊙ Ct-1), ct = g(c),
// Ct = ft ⊙ Ct-1 + it ⊙ ct, ot = f(o + Po ⊙ Ct), Ht = ot ⊙ h(Ct).
func (rr *recurrentRun) lstmStep(xt, h, c, rd *val, peep []*val, acts []ir.Op) (*val, *val, error) {
	im := rr.im
	g, err := rr.gates(xt, h, rd, 0, 4*rr.hidden)
	if err != nil {
		return nil, nil, err
	}
	pre := func(gate *val, p int, state *val) (*val, error) {
		if peep == nil {
			return gate, nil
		}
		ps, err := im.op(ir.OpMul, nil, peep[p], state)
		if err != nil {
			return nil, err
		}
		return im.op(ir.OpAdd, nil, gate, ps)
	}
	step := func(gate *val, p int, state *val, op ir.Op) (*val, error) {
		v, err := pre(gate, p, state)
		if err != nil {
			return nil, err
		}
		return rr.act(op, v)
	}
	it, err := step(g[0], 0, c, acts[0])
	if err != nil {
		return nil, nil, err
	}
	ft, err := step(g[2], 2, c, acts[0])
	if err != nil {
		return nil, nil, err
	}
	ct, err := rr.act(acts[1], g[3])
	if err != nil {
		return nil, nil, err
	}
	fc, err := im.op(ir.OpMul, nil, ft, c)
	if err != nil {
		return nil, nil, err
	}
	ic, err := im.op(ir.OpMul, nil, it, ct)
	if err != nil {
		return nil, nil, err
	}
	cNew, err := im.op(ir.OpAdd, nil, fc, ic)
	if err != nil {
		return nil, nil, err
	}
	ot, err := step(g[1], 1, cNew, acts[0])
	if err != nil {
		return nil, nil, err
	}
	hc, err := im.op(acts[2], nil, cNew)
	if err != nil {
		return nil, nil, err
	}
	hNew, err := im.op(ir.OpMul, nil, ot, hc)
	return hNew, cNew, err
}
