package vulkan

import (
	"errors"
	"fmt"

	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// pool is an arena with the device blocks it suballocates: one for
// tensors, one for weights (which live as long as the model, so packing
// them apart keeps the activations' blocks from fragmenting).
type pool struct {
	a      *arena
	blocks []*memBlock // by arena block index
	inUse  uint64
}

// The first block is small, so that small models take little memory;
// the tensors' blocks double from there. The weights' blocks stay at
// firstBlock: weights are uploaded once, in a known order, so doubling
// would only leave the last block up to half empty (a 590 MiB Q4_0 model
// took 960 MiB of blocks); fixed blocks waste less than one block.
const firstBlock = 64 << 20

func newPool(align, minBlock, maxBlock uint64) *pool {
	return &pool{a: newArena(align, min(minBlock, maxBlock), maxBlock)}
}

// vrange is where a tensor lives: a range of a block of one of the
// pools. A runtime.Buffer's handle is a devkit.Buf of it (vbuf), shared by
// the buffers that alias it (reshape views); the Buf's Size is the
// range's bytes, all bound to kernels.
type vrange struct {
	pool   *pool
	blk    *memBlock
	local  int // the block's index in pool
	off    uint64
	weight bool
}

type vbuf = devkit.Buf[vrange]

// accessOf is the memory of g that a command touches.
func accessOf(g *vbuf) access { return access{g.B.blk.id, g.B.off, g.B.off + g.Size} }

// alloc returns a new range of at least n bytes, and whether no command
// can have touched it yet (must hold d.mu).
func (d *Device) alloc(n uint64, weight bool) (*vbuf, bool, error) {
	p := d.tensors
	if weight {
		p = d.weights
	}
	pc, ok := p.a.alloc(n)
	if !ok {
		if pc.size > d.phys.MaxAllocation {
			return nil, false, fmt.Errorf("a tensor of %d bytes exceeds the device's largest allocation (%d bytes)", n, d.phys.MaxAllocation)
		}
		size := min(p.a.nextBlock(pc.size), d.phys.MaxAllocation)
		b, err := d.x.createBlock(size, d.memType, d.hostMem)
		if err != nil && isOutOfMemory(err) && size > pc.size {
			size = pc.size // the doubled block did not fit: take what the tensor needs
			b, err = d.x.createBlock(size, d.memType, d.hostMem)
		}
		if err != nil {
			return nil, false, fmt.Errorf("allocating %d bytes of device memory (%d in use): %w", size, d.stats.BlockBytes, err)
		}
		b.id = len(d.blocks)
		d.blocks = append(d.blocks, b)
		p.a.addBlock(size)
		p.blocks = append(p.blocks, b)
		d.stats.Allocs++
		d.stats.BlockBytes += size
		if pc, ok = p.a.alloc(n); !ok {
			return nil, false, fmt.Errorf("internal: a new block of %d bytes does not hold %d", size, n)
		}
	}
	p.inUse += pc.size
	r := vrange{pool: p, blk: p.blocks[pc.blk], local: pc.blk, off: pc.off, weight: weight}
	return devkit.NewBuf(r, pc.size), pc.fresh, nil
}

// release returns a range to its pool (must hold d.mu).
func (d *Device) release(g *vbuf) {
	r := g.B
	if err := r.pool.a.release(r.local, r.off, g.Size); err != nil && d.lost == nil {
		d.lost = fmt.Errorf("internal: freeing a buffer: %w", err)
	}
	r.pool.inUse -= g.Size
}

// Upload copies a tensor into a new device buffer. Any dtype is taken as
// its bytes (kernels decide what they read).
func (d *Device) Upload(t *tensor.Tensor) (*runtime.Buffer, error) {
	return d.upload(t, false)
}

// UploadWeight uploads a weight: like Upload, into the weights' own
// blocks. Kernels never write weights.
func (d *Device) UploadWeight(name string, t *tensor.Tensor) (*runtime.Buffer, error) {
	b, err := d.upload(t, true)
	if err != nil {
		return nil, fmt.Errorf("weight %s: %w", name, err)
	}
	return b, nil
}

func (d *Device) upload(t *tensor.Tensor, weight bool) (*runtime.Buffer, error) {
	if t == nil {
		return nil, errors.New("vulkan: upload of a nil tensor")
	}
	if err := devkit.CheckTensor(t); err != nil {
		return nil, fmt.Errorf("vulkan: upload: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.usable(); err != nil {
		return nil, err
	}
	data := d.store.Encode(t)
	g, fresh, err := d.alloc(uint64(len(data)), weight)
	if err != nil {
		return nil, fmt.Errorf("vulkan: upload of %s: %w", t, err)
	}
	if err := d.write(g, data, fresh); err != nil {
		d.release(g)
		return nil, fmt.Errorf("vulkan: upload of %s: %w", t, err)
	}
	return devkit.Wrap(d, g, t.DType, t.Shape), nil
}

// write copies data to the start of g (must hold d.mu): straight into its
// memory when the host sees it and no command can touch the range
// (fresh, or the device idle); otherwise through the staging buffer, as
// copy commands ordered with the rest.
func (d *Device) write(g *vbuf, data []byte, fresh bool) error {
	if len(data) == 0 {
		return nil
	}
	if d.hostMem && !d.opts.ForceStaging {
		idle, err := d.idle()
		if err != nil {
			return err
		}
		if fresh || idle {
			copy(g.B.blk.bytes(g.B.off, uint64(len(data))), data)
			return nil
		}
	}
	for done := 0; done < len(data); {
		off, got, err := d.stage(min(uint64(len(data)-done), d.opts.StagingBytes), false)
		if err != nil {
			return err
		}
		n := int(got)
		copy(d.staging.blk.bytes(off, uint64(n)), data[done:done+n])
		dst := access{g.B.blk.id, g.B.off + uint64(done), g.B.off + uint64(done+n)}
		d.command(copyOp(d.staging.blk.buf, off, g.B.blk.buf, dst.off, uint64(n)), nil, []access{dst})
		d.stats.Staged += uint64(n)
		done += n
	}
	return nil
}

// Download copies a buffer to the host, submitting pending work and waiting
// for it.
func (d *Device) Download(b *runtime.Buffer) (*tensor.Tensor, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, t, raw, err := d.downloadTo(b)
	if err != nil {
		return nil, err
	}
	if err := d.read(g, raw); err != nil {
		return nil, fmt.Errorf("vulkan: download of %s: %w", b, err)
	}
	d.fromStored(t, raw)
	return t, nil
}

// downloadTo checks a download of b and returns its buffer, the tensor the
// download fills and the bytes to read from the device into, which are the
// tensor's unless b is stored as f16 (fromStored widens them then).
func (d *Device) downloadTo(b *runtime.Buffer) (g *vbuf, t *tensor.Tensor, raw []byte, err error) {
	if g, err = devkit.Handle[vrange](d, b); err != nil {
		return nil, nil, nil, fmt.Errorf("vulkan: download: %w", err)
	}
	if err := d.usable(); err != nil {
		return nil, nil, nil, err
	}
	t = tensor.New(b.DType, b.Shape)
	raw = t.Data
	if d.store.Halved(b.DType) {
		raw = make([]byte, len(t.Data)/2)
	}
	if uint64(len(raw)) > g.Size {
		return nil, nil, nil, fmt.Errorf("vulkan: download of %s: the buffer holds %d bytes", b, g.Size)
	}
	return g, t, raw, nil
}

// fromStored widens raw into t when t is stored as f16.
func (d *Device) fromStored(t *tensor.Tensor, raw []byte) {
	if d.store.Halved(t.DType) {
		devkit.FromHalf(raw, t.Data)
	}
}

// read copies the start of g into out once the work before it is done
// (must hold d.mu).
func (d *Device) read(g *vbuf, out []byte) error {
	if d.hostMem && !d.opts.ForceStaging {
		if err := d.flushWait(); err != nil {
			return err
		}
		copy(out, g.B.blk.bytes(g.B.off, uint64(len(out))))
		return nil
	}
	for done := 0; done < len(out); {
		off, got, err := d.stage(min(uint64(len(out)-done), d.opts.StagingBytes), false)
		if err != nil {
			return err
		}
		n := int(got)
		src := access{g.B.blk.id, g.B.off + uint64(done), g.B.off + uint64(done+n)}
		d.command(copyOp(g.B.blk.buf, src.off, d.staging.blk.buf, off, uint64(n)), []access{src}, nil)
		if err := d.flushWait(); err != nil {
			return err
		}
		copy(out[done:done+n], d.staging.blk.bytes(off, uint64(n)))
		d.stats.Staged += uint64(n)
		done += n
	}
	return nil
}

// Free returns a buffer's range once no alias uses it. Commands already
// recorded may still use it: a later command that writes the range is
// ordered after them by a barrier (hazard.go).
func (d *Device) Free(b *runtime.Buffer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := devkit.Take[vrange](d, b); g != nil && !d.closed && g.Drop() {
		if d.capturing != nil {
			d.capturing.pinned = append(d.capturing.pinned, g)
			return
		}
		d.release(g)
	}
}
