package vulkan

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tapml/tapml/ir"
	"github.com/tapml/tapml/tensor"
)

// TestArenaFirstFit follows a sequence of allocations and frees through
// one arena: offsets are first fit and aligned, freed neighbours merge,
// a request that fits no block asks for a new one (doubling, or the
// request's size when larger), and double frees are refused.
func TestArenaFirstFit(t *testing.T) {
	a := newArena(64, 1024, 4096)
	if _, ok := a.alloc(10); ok {
		t.Fatal("alloc from an arena with no blocks succeeded")
	}
	if got := a.nextBlock(10); got != 1024 {
		t.Errorf("first block %d, want 1024", got)
	}
	a.addBlock(1024)
	type step struct {
		alloc uint64 // bytes, or 0 to free the piece of index free
		free  int
		want  piece
	}
	var got []piece
	for i, s := range []step{
		{alloc: 10, want: piece{0, 0, 64, true}},
		{alloc: 100, want: piece{0, 64, 128, true}},
		{alloc: 64, want: piece{0, 192, 64, true}},
		{free: 1},
		{alloc: 64, want: piece{0, 64, 64, false}}, // first fit: the freed hole
		{free: 0},
		{free: 4}, // merges [0, 192)
		{alloc: 128, want: piece{0, 0, 128, false}}, // the merged hole
		{alloc: 2000}, // fits no block
	} {
		if s.alloc == 0 {
			p := got[s.free]
			if err := a.release(p.blk, p.off, p.size); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			got = append(got, piece{})
			continue
		}
		p, ok := a.alloc(s.alloc)
		if s.want == (piece{}) {
			if ok {
				t.Fatalf("step %d: alloc of %d fit at %+v", i, s.alloc, p)
			}
			got = append(got, p)
			continue
		}
		if !ok || p != s.want {
			t.Fatalf("step %d: alloc(%d) = %+v, %v; want %+v", i, s.alloc, p, ok, s.want)
		}
		got = append(got, p)
	}
	if n := a.nextBlock(2000); n != 2048 {
		t.Errorf("next block for 2000 bytes: %d, want 2048 (double 1024)", n)
	}
	if n := a.nextBlock(5000); n != 5056 {
		t.Errorf("next block for 5000 bytes: %d, want 5056 (the request, rounded)", n)
	}
	if err := a.release(0, 0, 128); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ blk, off, size uint64 }{{0, 0, 64}, {0, 960, 128}, {1, 0, 64}} {
		if err := a.release(int(bad.blk), bad.off, bad.size); err == nil {
			t.Errorf("release(%d, %d, %d) succeeded, want a double-free or range error", bad.blk, bad.off, bad.size)
		}
	}
}

// TestArenaRandom allocates and frees at random over several blocks and
// checks after each step that live pieces never overlap and are aligned,
// and that once everything is freed each block is one free span again.
func TestArenaRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	a := newArena(256, 4096, 16384)
	var live []piece
	for step := 0; step < 4000; step++ {
		if len(live) > 0 && r.IntN(2) == 0 {
			i := r.IntN(len(live))
			p := live[i]
			if err := a.release(p.blk, p.off, p.size); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			live = append(live[:i], live[i+1:]...)
			continue
		}
		n := uint64(r.IntN(3000) + 1)
		p, ok := a.alloc(n)
		if !ok {
			a.addBlock(a.nextBlock(n))
			if p, ok = a.alloc(n); !ok {
				t.Fatalf("step %d: a new block does not hold %d bytes", step, n)
			}
		}
		if p.off%256 != 0 || p.size < n || p.off+p.size > a.blocks[p.blk].size {
			t.Fatalf("step %d: alloc(%d) = %+v", step, n, p)
		}
		for _, q := range live {
			if q.blk == p.blk && q.off < p.off+p.size && p.off < q.off+q.size {
				t.Fatalf("step %d: %+v overlaps live %+v", step, p, q)
			}
		}
		live = append(live, p)
	}
	for _, p := range live {
		if err := a.release(p.blk, p.off, p.size); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range a.blocks {
		if diff := cmp.Diff([]span{{0, b.size}}, b.free, cmp.AllowUnexported(span{})); diff != "" {
			t.Errorf("block %d after freeing everything (-want +got):\n%s", i, diff)
		}
		if a.used(i) != 0 {
			t.Errorf("block %d: %d bytes used", i, a.used(i))
		}
	}
}

// Weights take their bytes plus less than one block of device memory: 100
// weights of 1 MiB took 192 MiB of doubling blocks (64 + 128) and take 128
// MiB of fixed ones.
func TestWeightBlocksDoNotDouble(t *testing.T) {
	d := openTest(t, Options{})
	const n, size = 100, 1 << 20
	w := tensor.New(ir.F32, []int{size / 4})
	for i := range n {
		b, err := d.UploadWeight(fmt.Sprint("w", i), w)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(b)
	}
	if got, limit := d.Stats().BlockBytes, uint64(n*size+firstBlock); got >= limit {
		t.Errorf("%d weights of %d bytes took %d bytes of blocks; want less than %d (their bytes and one block)", n, size, got, limit)
	}
}
