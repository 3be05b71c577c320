package vulkan

import (
	"fmt"

	"github.com/tapml/tapml/runtime"
	"github.com/tapml/tapml/runtime/internal/devkit"
	"github.com/tapml/tapml/tensor"
)

// A greedy session's lookahead (runtime/llm): the session starts the
// download of a step's argmax, copies that argmax into the token buffer of
// the next step (CopyBuffer) and launches the next step, which replays
// its capture on the same buffers, before it waits for the token.

var (
	_ runtime.AsyncDownloader = (*Device)(nil)
	_ runtime.Copier          = (*Device)(nil)
)

// StartDownload submits the work launched so far with a copy of b to a
// staging region it keeps for this download, and returns at once; wait
// waits for that submission only (not for work submitted after it) and
// reads the region. The copy goes through staging even when b's memory is
// host-visible: work launched after StartDownload may overwrite b. A
// download larger than a quarter of the staging buffer is read at once.
func (d *Device) StartDownload(b *runtime.Buffer) (wait func() (*tensor.Tensor, error), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, t, raw, err := d.downloadTo(b)
	if err != nil {
		return nil, err
	}
	n := uint64(len(raw))
	if n == 0 || n > d.opts.StagingBytes/4 {
		if err := d.read(g, raw); err != nil {
			return nil, fmt.Errorf("vulkan: download of %s: %w", b, err)
		}
		d.fromStored(t, raw)
		return func() (*tensor.Tensor, error) { return t, nil }, nil
	}
	off, _, err := d.stage(n, true)
	if err != nil {
		return nil, fmt.Errorf("vulkan: download of %s: %w", b, err)
	}
	d.command(copyOp(g.B.blk.buf, g.B.off, d.staging.blk.buf, off, n), []access{accessOf(g)}, nil)
	if err := d.submit(); err != nil {
		d.unstage(off)
		return nil, err
	}
	d.stats.Staged += n
	serial := d.serial
	return func() (*tensor.Tensor, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		defer d.unstage(off)
		if err := d.usable(); err != nil {
			return nil, err
		}
		if err := d.waitFor(serial); err != nil {
			return nil, err
		}
		copy(raw, d.staging.blk.bytes(off, n))
		d.fromStored(t, raw)
		return t, nil
	}, nil
}

// CopyBuffer copies src into dst, both of this device, of one dtype and
// size, after the work launched before and before the work launched
// after (as Write).
func (d *Device) CopyBuffer(dst, src *runtime.Buffer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	gd, err := devkit.Handle[vrange](d, dst)
	if err != nil {
		return fmt.Errorf("vulkan: copy: destination %w", err)
	}
	gs, err := devkit.Handle[vrange](d, src)
	if err != nil {
		return fmt.Errorf("vulkan: copy: source %w", err)
	}
	if err := d.usable(); err != nil {
		return err
	}
	if !dst.Type().Equal(src.Type()) {
		return fmt.Errorf("vulkan: copy of %s into %s", src, dst)
	}
	if gd.B.weight {
		return fmt.Errorf("vulkan: copy into %s, a weight", dst)
	}
	n := uint64(d.store.Bytes(dst.Type()))
	if n == 0 {
		return nil
	}
	dstAcc, srcAcc := access{gd.B.blk.id, gd.B.off, gd.B.off + n}, access{gs.B.blk.id, gs.B.off, gs.B.off + n}
	d.command(copyOp(gs.B.blk.buf, gs.B.off, gd.B.blk.buf, gd.B.off, n), []access{srcAcc}, []access{dstAcc})
	return nil
}
