package vulkan

import (
	"fmt"
	"slices"
)

// stagingBuf is a host-visible buffer that uploads and downloads pass
// through. Its regions are handed out lowest offset first and each is
// free again once the submission that uses it is done, or, for a download
// started with StartDownload, once the host has read it: with downloads
// pending the device is never idle, and a greedy session's steps then
// take the same few offsets in turn, so that their command lists repeat
// and replay (replay.go).
type stagingBuf struct {
	blk     *memBlock
	regions []stageRegion // by offset
}

// stageRegion is a range of the staging buffer in use.
type stageRegion struct {
	off, end uint64
	serial   uint64 // the submission that copies through it
	held     bool   // a pending download's data, not yet read
}

// stageAlign aligns staging regions (copy offsets need 4; 16 keeps
// f16 and vector data aligned too).
const stageAlign = 16

// stage returns the offset of n free staging bytes (n <= StagingBytes)
// for the command list being built: free once that list's submission is
// done, or, when held, once unstage releases it. When no range is free it
// waits for the device; then, unless held, it may return fewer bytes (got)
// when pending downloads hold the rest (must hold d.mu).
func (d *Device) stage(n uint64, held bool) (off, got uint64, err error) {
	if d.staging == nil {
		b, err := d.x.createBlock(d.opts.StagingBytes, d.stagingType, true)
		if err != nil {
			return 0, 0, fmt.Errorf("staging buffer of %d bytes: %w", d.opts.StagingBytes, err)
		}
		d.staging = &stagingBuf{blk: b}
	}
	st := d.staging
	for try := 0; ; try++ {
		st.prune(d.done)
		off, at, size := st.fit(n)
		if size >= n || (try == 2 && !held && size > 0) {
			got = min(n, size)
			st.regions = slices.Insert(st.regions, at, stageRegion{off: off, end: off + got, serial: d.serial + 1, held: held})
			return off, got, nil
		}
		switch try {
		case 0:
			if err := d.reap(); err != nil {
				return 0, 0, fmt.Errorf("vulkan: %w", err)
			}
		case 1:
			if err := d.flushWait(); err != nil {
				return 0, 0, err
			}
		default:
			return 0, 0, fmt.Errorf("vulkan: the staging buffer (%d bytes) is held by downloads not yet waited for", st.blk.size)
		}
	}
}

// unstage frees the held region at off, a download's, once read (must
// hold d.mu).
func (d *Device) unstage(off uint64) {
	if d.staging == nil {
		return // the device was closed
	}
	st := d.staging
	if i := slices.IndexFunc(st.regions, func(r stageRegion) bool { return r.held && r.off == off }); i >= 0 {
		st.regions = slices.Delete(st.regions, i, i+1)
	}
}

// prune drops the regions whose submission is done and that no pending
// download holds.
func (st *stagingBuf) prune(done uint64) {
	st.regions = slices.DeleteFunc(st.regions, func(r stageRegion) bool { return !r.held && r.serial <= done })
}

// fit returns the lowest aligned offset with n free bytes (size n) and
// where its region goes in st.regions; when there is none, the largest
// free range (size < n).
func (st *stagingBuf) fit(n uint64) (off uint64, at int, size uint64) {
	var start uint64
	for i := 0; i <= len(st.regions); i++ {
		end := st.blk.size
		if i < len(st.regions) {
			end = st.regions[i].off
		}
		if end >= start+n {
			return start, i, n
		}
		if end > start && end-start > size {
			off, at, size = start, i, end-start
		}
		if i < len(st.regions) {
			start = (st.regions[i].end + stageAlign - 1) / stageAlign * stageAlign
		}
	}
	return off, at, size
}
