package vulkan

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// The driver's pipeline cache (compiled kernels) is kept on disk between
// runs, one file per driver build, so that a second run skips the
// driver's shader compiler. The file is the driver's own blob; tapml
// checks its header (VK_PIPELINE_CACHE_HEADER_VERSION_ONE) against the
// device before handing it over, bounds its size, and writes it
// atomically (a temporary file renamed over the old one). A missing,
// foreign or damaged file is ignored: the cache only saves time.

// maxPipelineCache bounds the file read back (drivers' caches of tapml's
// kernels are a few MiB).
const maxPipelineCache = 256 << 20

// pipelineCacheFile is the cache file of device p in dir.
func pipelineCacheFile(dir string, p *physInfo) string {
	return filepath.Join(dir, fmt.Sprintf("%04x-%04x-%08x-%s.bin", p.Vendor, p.DeviceID, p.Driver, hex.EncodeToString(p.CacheUUID[:])))
}

// checkCacheHeader checks that data is a pipeline cache of device p.
func checkCacheHeader(data []byte, p *physInfo) error {
	if len(data) < 32 {
		return fmt.Errorf("pipeline cache of %d bytes has no header", len(data))
	}
	le := binary.LittleEndian
	size, version := le.Uint32(data[0:]), le.Uint32(data[4:])
	vendor, device := le.Uint32(data[8:]), le.Uint32(data[12:])
	switch {
	case size < 32 || uint64(size) > uint64(len(data)):
		return fmt.Errorf("pipeline cache header of %d bytes in a file of %d", size, len(data))
	case version != 1:
		return fmt.Errorf("pipeline cache header version %d, want 1", version)
	case vendor != p.Vendor || device != p.DeviceID:
		return fmt.Errorf("pipeline cache of device %04x:%04x, this is %04x:%04x", vendor, device, p.Vendor, p.DeviceID)
	case string(data[16:32]) != string(p.CacheUUID[:]):
		return errors.New("pipeline cache of another driver build (its UUID differs)")
	}
	return nil
}

// loadPipelineCache reads the cache file of p in dir; nil when there is
// none or it does not belong to p.
func loadPipelineCache(dir string, p *physInfo) []byte {
	if dir == "" {
		return nil
	}
	f, err := os.Open(pipelineCacheFile(dir, p))
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPipelineCache+1))
	if err != nil || len(data) > maxPipelineCache || checkCacheHeader(data, p) != nil {
		return nil
	}
	return data
}

// savePipelineCache writes data as the cache file of p in dir, atomically.
func savePipelineCache(dir string, p *physInfo, data []byte) error {
	if dir == "" || len(data) == 0 || len(data) > maxPipelineCache {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".pipeline-*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), pipelineCacheFile(dir, p)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// defaultPipelineCacheDir is $XDG_CACHE_HOME/tapml/vulkan (or
// ~/.cache/tapml/vulkan); "" when the user has no cache folder.
func defaultPipelineCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "tapml", "vulkan")
}
